"""Why a mutant survives: (mutant name regex, changed-lines regex, reason), first match
wins; read by tools/mutation_report.py. Each reason was checked by reading the code (and,
where it says so, by running the mutant against a test written to kill it).

"equivalent" means no input can tell the mutant from the code; "unreachable" means no
input of the expression language reaches the line (it is a defense, tested directly
where that is possible); anything else names the gap.
"""

REASONS = [
    # ------------------------------------------------------------------ printer
    (r"printer.*_number", r"evalf\((31|None)\)",
     "equivalent: the 30-digit value is only tested for finiteness and an imaginary part"),
    (r"printer.*(_number|_print_Mul)", r"q - 2",
     "equivalent: for a denominator q >= 2, q & (q-2) == 0 exactly when q is a power of 2"),
    (r"printer.*_number", r"p <= 0|p < 1",
     "equivalent: p is a nonzero integer here (the rational is not an integer)"),
    (r"printer.*_print_Pow", r"rational=True", "equivalent: the parameter is unused"),
    (r"printer.*_print_Pow", r"exp <= 0|exp < 1",
     "equivalent: x**0 is 1 in SymPy and never reaches the printer"),
    (r"printer.*_print_Const", r"p <= 0|p < 1",
     "equivalent: a Const's coefficient is a nonzero rational (0 * c is 0, never a Const)"),
    (r"printer.*TFPrinter.*__init__", r"",
     "equivalent: every print method these settings change (SymPy's own, for functions "
     "and constants) is overridden by TFPrinter or refused; the Python printer's "
     "standard is python3 by default"),
    (r"printer.*TFPrinter.*_print__", r"_print\(expr, \)",
     "equivalent: no caller passes keyword arguments to _print"),
    (r"printer.*print_value", r"AssertionError\(None\)",
     "unreachable: ir.Call refuses an unknown function when it is built"),
    # ------------------------------------------------------------------ expr
    (r"expr.*visit_Compare", r"or True|>= 1",
     "equivalent: And() of one relational is that relational"),
    (r"expr.*_ExprError.*__init__", r"super", "equivalent: str() of the error is never used"),
    (r"expr.*visit_(Call|Name)", r"get_close_matches\(.*(n=2|, \))",
     "equivalent: only the best match (the first) is shown"),
    (r"expr.*visit_Call", r"_elementwise\(None, (UNARY|sympy\.log\(args\[0\]\.expr\))",
     "equivalent: one operand cannot fail to broadcast, so the node (where an error "
     "would point) is never used"),
    (r"expr.*visit_Call", r"AssertionError\(None\)",
     "unreachable: every allowed function is handled above"),
    # ------------------------------------------------------------------ shapes
    (r"shapes.*matmul_shape", r"contracted dims",
     "equivalent: matmul_shape replaces unify's message with its own"),
    # ------------------------------------------------------------------ outputs
    (r"outputs.*", r"encoding=None|read_text\(errors|open\(path, errors|decode\(errors"
     r"|\"UTF-8\"",
     "equivalent on a UTF-8 locale (and 'UTF-8' is the same codec as 'utf-8'; bytes."
     "decode() is UTF-8 by default); the explicit UTF-8 is for other locales"),
    (r"outputs.*_op_blocks", r"XX",
     "equivalent: both texts compared go through _op_blocks, so a constant added to "
     "every block cancels"),
    (r"outputs.*_write_all", r"umask\(1\)",
     "equivalent: the value stands only between reading the umask and restoring it"),
    # ------------------------------------------------------------------ derive
    (r"derive.*_node_vjp", r"AssertionError\(None\)",
     "unreachable: the parser makes no other node kinds"),
    (r"derive.*_Deriver.*(__init__|_symbol)", r"symbol_kind|Symbol\(name, \)",
     "equivalent: the gradient function's own symbols (cotangents, targets) only "
     "multiply and add; no evaluation depends on their being real (every recorded op "
     "prints the same)"),
    (r"derive.*_elementwise_vjp", r"continue|break",
     "equivalent: expr == v means v is expr's only free symbol, so nothing follows"),
    (r"derive.*_cse", r"order=|numbered_symbols\(\"(XX_cseXX|_CSE)\"\)",
     "equivalent: SymPy's cse orders canonically for any order but 'none', and a "
     "temporary's prefix (any that starts with '_', which no input can) is renamed"),
    (r"derive.*_constants", r"and False",
     "equivalent: rebuilding an unchanged node gives an equal node (every recorded op "
     "prints the same); kept to leave nodes as built"),
    (r"derive.*_cheap_forms", r"p >= 0|p > 1",
     "equivalent: here p is odd with |p| >= 3"),
    (r"derive.*_check_printable|derive.*_partial", r"_check_printable\(None|, None\)$",
     "unreachable: no derivative of the language holds these functions (the check is "
     "tested directly)"),
    # ------------------------------------------------------------------ stability
    (r"stability\.normalize.*scaled_exp", r"sign / k",
     "equivalent: sign is +1 or -1, so sign/k and sign*k have the same sign"),
    (r"stability\.match.*_exp_terms", r"sum\(2 for",
     "equivalent: a count of 2s is 0 exactly when the count of 1s is"),
    (r"hypot", r"sum\(2 for",
     "equivalent: a count of 2s is 0 exactly when the count of 1s is"),
    (r"stability\.guards.*_taylor", r"series\(_standard\(expr\), v, None",
     "equivalent: SymPy's series takes x0=None as 0"),
    (r"stability\.guards.*_vanishes", r"return True",
     "unreachable: subs at 0 raised for no expression derivation passes (a defense)"),
    (r"stability\.reductions.*_new_node", r"node_assumptions\(op, None|is_complex=None",
     "equivalent: the new nodes are logsumexp, softmax and log_softmax, whose "
     "assumptions do not read the operand; None is falsy like False"),
    (r"stability\.reductions.*_log_softmax", r"found\.append\(None\)",
     "equivalent: found is only tested for emptiness"),
    (r"stability\.reductions.*_log_softmax", r"isinstance\(e, sympy\.Add\) or lse",
     "equivalent: for a non-sum holding lse the candidate still holds lse (or k is 0), "
     "so it is not taken"),
    (r"stability\.reductions.*_bottom_up", r"or True",
     "equivalent: rebuilding an unchanged node gives an equal node"),
    (r"stability\.reductions.*_tidy", r"isinstance\(f, sympy\.exp\)\) and False",
     "equivalent: log(exp(u)) is u for real u (SymPy evaluates it)"),
    (r"families\.logsumexp.*_split_logsumexp", r"count_ops\(e\) \+ 2",
     "equivalent: the +1 only separates a zero remainder from the others; +2 orders "
     "them the same"),
    (r"families\.logsumexp.*_split_logsumexp", r"key <= best",
     "equivalent: equal keys mean equal remainders, so equal results"),
    (r"families\.norms.*_root", r"f\.exp >= 0|f\.exp > 1|f\.exp / 2",
     "equivalent: the exponent is a positive even integer (x**0 is 1, never a factor), "
     "so > 0, >= 0 and > 1 agree and / 2 is exact"),
]
