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
    (r"expr\.parser.*_Core.*visit_Compare", r"or True|>= 1",
     "equivalent: And() of one relational is that relational"),
    (r"expr\.parser.*_Core.*_operator", r"line is not None or col is not None",
     "unreachable: a parsed BinOp's operator is in the text after its left operand, so "
     "the search finds it before passing the last line, and parsed nodes always have "
     "positions"),
    (r"expr\.syntax.*_ExprError.*__init__", r"super",
     "equivalent: str() of the error is never used"),
    (r"expr\.(calls.*_Calls.*visit_Call|parser.*_Core.*visit_Name)",
     r"get_close_matches\(.*(n=2|, \))",
     "equivalent: only the best match (the first) is shown"),
    (r"expr\.calls.*_Calls.*visit_Call",
     r"_elementwise\(None, (UNARY|sympy\.log\(args\[0\]\.expr\))",
     "equivalent: one operand cannot fail to broadcast, so the node (where an error "
     "would point) is never used"),
    (r"expr\.calls.*_Calls.*visit_Call", r"AssertionError\(None\)",
     "unreachable: every allowed function is handled above"),
    # ------------------------------------------------------------------ functions
    (r"outputs.*read_header", r'split\(b"\\n", 2\)',
     "equivalent: only the first part of the split is used, the same for any maxsplit"),
    (r"functions\.internal.*Ratio.*fdiff", r"argindex=2",
     "equivalent: SymPy always passes argindex, and gradgen never calls fdiff() itself"),
    (r"functions\.numeric.*np_log1mexp", r"np\.where\(near, x, -[0-9.]+\)|np\.where\(near, -[0-9.]+, x\)",
     "equivalent: the inner where only gives the branch not taken a safe input (any "
     "negative number), and the outer where discards that branch's value"),
    (r"functions\.numeric.*np_xlog1?py", r"1\.0 \* x",
     "equivalent: x is 0 where that branch is taken, and 1.0 * x is then the same zero "
     "as 0.0 * x (-0.0 included)"),
    (r"functions\.numeric.*np_xlog1py", r"np\.where\(None, ",
     "equivalent: the inner where only keeps log1p's argument off -1 where x = 0, and "
     "the outer where takes 0 there (NumPy's warnings are off there: the test of "
     "special points without warnings passes)"),
    # ------------------------------------------------------------------ derive
    (r"derive\.cse.*x_share", r"symbols=None",
     "equivalent: the temporaries are named afterwards (derive/cse.py _names, from the "
     "replacement list), so SymPy's default x0, x1, ... are never printed, and as "
     "symbols without assumptions they are never equal to an input (a real symbol)"),
    (r"derive\.elementwise.*_covers", r"return True",
     "unreachable: the False it replaces is for a symbol of the partial missing from "
     "shape_of, and partials are built only of inputs and node symbols, all in it"),
    (r"derive\.elementwise.*_pull_sign", r"evaluate=(None|True)|\], \)\)",
     "equivalent: evaluate=None takes evaluate=False's path in Piecewise.__new__, and "
     "evaluating a Piecewise whose values are all negated changes nothing (negation "
     "keeps its conditions and which of its values are equal)"),
    (r"expr\.parse.*x_parse_op__mutmut_(12|13|14|150|151|152|153|155|156)$", r"",
     "killed since the run: the lines are gone (fallbacks for a dtype, fuse and memory "
     "that spec/resolve.py always fills in, and _compute_dtype's own float32)"),
    (r"derive\.forms.*ratio_powers__mutmut_(32|33|44)$", r"",
     "killed since the run: test_ratio_powers_pair_the_highest_powers_first (a tie among "
     "the denominators; two pairs)"),
    (r"derive\.forms.*ratio_powers", r"exp >= 0|exp > 1",
     "equivalent: exp is an integer of magnitude at least 2 here"),
    (r"derive\.elementwise.*elementwise_vjp", r"narrow is None\) or True|narrow\[2\]",
     "unreachable: a narrow cotangent comes with a compound operand only "
     "(reverse._operand_vjp adds a bare symbol's itself), and a compound expression is "
     "never equal to one of its symbols"),
    (r"derive\.stabilize.*finalize__mutmut_21$", r"",
     "killed since the run: test_a_vanishing_product_is_guarded_in_the_op_dtype"),
    (r"derive\.stabilize.*finalize__mutmut_25$", r"",
     "killed since the run: test_cheaper.py (in the test selection since)"),
    (r"derive\.text.*spec_str__mutmut_2$", r"",
     "killed since the run: the line is gone (gradgen.pinned: every printer starts from "
     "its class defaults, and test_pinned.py shows that global settings change nothing)"),
    (r"shapes.*x_broadcast__mutmut_3$", r"",
     "killed since the run: test_broadcast_with_batch_errors, a batch in the second "
     "shape only"),
    (r"expr\.parse.*_input_vars__mutmut_(36|44)$", r"",
     "killed since the run: test_domains.py (in the test selection since)"),
    (r"expr\.parser.*_Core.*visit__mutmut_50$", r"",
     "killed since the run: test_the_bound_on_a_folded_constant_is_1100_bits"),
    (r"expr\.parser.*_Core.*_check_real_constants__mutmut_9$", r"",
     "killed since the run: the bad-spec record of refused_values.yaml "
     "(cannot_be_evaluated, its position)"),
    (r"derive\.context.*Derivation.*symbol", r"\"REAL\"",
     "GAP: the locals and upstreams of a real op lose their real assumption (SymPy "
     "ignores the unknown key); no selected test shows a derivation that needs it"),
    # ------------------------------------------------------------------ guards
    (r"guards\.singularities.*_by_inputs", r"and False",
     "GAP: the case where one group of terms fills its removable singularity and "
     "another does not; no test found an expression that reaches it"),
    (r"guards\.products.*_decay_argument", r"-other \* one",
     "equivalent: one is +1 or -1, so dividing by it is multiplying"),
    (r"guards\.products.*_decay_argument", r"f\.exp (>= 0|> 1):",
     "equivalent: x**0 is 1 and x**1 is x in SymPy, so no integer power 0 or 1 is a Pow"),
    (r"guards\.products.*_decay_argument", r"isinstance\(f, sympy\.Add\) or len",
     "equivalent: a two-argument product or call with +1 or -1 among its arguments "
     "(-1 * tanh(u)), less that one, is never +-tanh(u) nor minus a tanh square"),
    (r"guards\.products.*_decay_argument__mutmut_4$", r"",
     "killed since the run: test_vanishing_products, x**2 * sigmoid(x)**2"),
    (r"derive\.elementwise.*check_printable__mutmut_(9|1[0-6])$", r"",
     "killed since the run: test_a_real_op_whose_derivative_is_imaginary_is_refused "
     "(the whole message)"),
    (r"derive\.cse.*temp_name__mutmut_35$", r"",
     "killed since the run: test_cse_temporaries_are_named_after_what_they_hold"),
    (r"derive\.unbroadcast.*_reduced_axes", r"has_batch\(None\)",
     "equivalent: a total's shape has a batch dim exactly where one of its symbols has "
     "one (the shape is their broadcast, and every contribution holds the upstream or a "
     "cotangent), so either test alone returns None for it"),
    (r"derive\.unbroadcast.*accumulate", r"unbroadcast\(total, plan, None\)",
     "equivalent: a group sums to 0 only under a static plan (reduced() needs "
     "_reduced_axes), and a static unbroadcast never reads its target"),
    (r"derive\.unbroadcast.*x_reduced", r"_zero_sum\(None,",
     "equivalent: _zero_sum does not read the derivation (its parameter is unused)"),
    (r"derive\.unbroadcast.*x_reduced", r"scale == 2 or",
     "equivalent: scale == 1 is a number, which the next test takes"),
    (r"derive\.unbroadcast.*x_reduced", r"scale == 1 and rest == 1|rest == 2 or",
     "unreachable: rest is 1 only where every symbol of the total has size 1 along the "
     "kept axes, but a total's shape is the broadcast of its symbols' shapes (an upstream "
     "broadcast wider is a symbol of the wide shape, upstream_wide), and a kept axis is "
     "one where that shape is not 1"),
    (r"derive\.unbroadcast.*x_reduced", r"unbroadcast\((total|rest), plan, None\)",
     "equivalent: past _reduced_axes the plan is static, and a static unbroadcast "
     "never reads its target"),
    (r"shapes.*reduction_plan", r"has_batch\(None\) or has_batch\(output_shape\)",
     "equivalent: the output shape is the broadcast of the input's with others, so it "
     "has a batch dim wherever the input has one"),
    (r"derive\.assemble.*(example_shapes__mutmut_(5|6|7|29|31)|named_dims__mutmut_(3|5|14))$",
     r"", "killed since the run: test_example_shapes_and_named_dims_of_batched_inputs"),
    (r"derive\.assemble.*op_ir__mutmut_(61|69)$", r"",
     "killed since the run: test_domains.py's test_emitted_cases_carry_the_domains "
     "(that file is in the test selection since)"),
    (r"derive\.unbroadcast.*accumulate", r"zero_groups\[:2\]",
     "killed since the run: the line is gone; a cotangent whose every group sums to 0 "
     "is zeros (test_reduced_sums.py, two such groups for mu)"),
    (r"families\.powers.*_exp_power__mutmut_28$", r"",
     "killed since the run: test_stable.py exp_power, sin(z) times a sum with 2 / x**2"),
    (r"families\.powers.*_exp_power", r"\(f is not e\) or True",
     "equivalent: _power_of of the exponential itself is None (it is neither a power "
     "of x nor an xdivy)"),
    (r"guards\.products.*_without_cancellation", r"(sign|u) / (one|sign)",
     "equivalent: one and sign are each +1 or -1, so dividing by them is multiplying"),
    (r"guards\.taylor.*_grown_plan", r"rate >= 0",
     "equivalent: at rate 0 the extra factor (1 + |g|)**0 is SymPy's 1, which the "
     "product drops"),
    # ------------------------------------------------------------------ VJP ops
    (r"derive\.vjp_op.*_Lowering.*_log_softmax", r"",
     "unreachable: a log_softmax call is made only by the forward pass "
     "(forward.forward_call), and no VJP rule puts one in a gradient function (the "
     "log-softmax VJP calls log_softmax_grad, logsumexp's calls softmax); it is kept "
     "so that every IR call has a lowering"),
    (r"derive\.vjp_op.*_Lowering.*_reduction", r"count",
     "unreachable: a reduction with a count (a log-mean-exp) is made only by the "
     "forward pass, whose tensor nodes the VJP op takes as they are; no VJP rule makes "
     "one (tests/test_vjp_op.py's log_mean_exp differentiates one twice more)"),
    (r"derive\.vjp_op.*_Lowering.*node__", r"self\.count -= 1",
     "equivalent: the count only makes each new node's symbol unique (_vjp_node-1, "
     "-2, ... are as unique), and VJP ops are derived, not printed"),
    (r"derive\.vjp_op.*_Lowering.*_inverse", r"\(call\.param\(\"adjoint\"\)\) or True",
     "unreachable: every inverse() a gradient function calls has adjoint=True "
     "(derive/matrix.py, derive/adjoints.py); the forward's inverse is a node, not a call"),
    (r"derive\.vjp_op.*_Lowering.*_extremum_grad", r"\"(TIES|XXtiesXX)\"",
     "equivalent: only the local name a printed node would take; VJP ops are derived, "
     "not printed"),
    (r"derive\.vjp_op.*_Lowering.*_unreduce", r"_call_node\(call, 1, \)",
     "equivalent: an unreduce's static shape is its second operand's (the input it "
     "spreads back to)"),
    # ------------------------------------------------------------------ shapes
    (r"shapes.*matmul_shape", r"contracted dims",
     "equivalent: matmul_shape replaces unify's message with its own"),
    # ------------------------------------------------------------------ outputs
    (r"outputs.*", r"encoding=None|read_text\(errors|open\(path, errors|decode\(errors"
     r"|\"UTF-8\"",
     "equivalent on a UTF-8 locale (and 'UTF-8' is the same codec as 'utf-8'; bytes."
     "decode() is UTF-8 by default); the explicit UTF-8 is for other locales"),
    (r"stability\.reductions.*_tidy", r"isinstance\(f, sympy\.exp\)\) and False",
     "equivalent: the factors are real, and SymPy evaluates log(exp(u)) to u for real u"),
    (r"guards\.products.*_polynomial_bound", r"\(e\.is_real\) or True",
     "unreachable: the guards run on real expressions, where a number is real"),
    (r"outputs.*_op_blocks", r"XX",
     "equivalent: both texts compared go through _op_blocks, so a constant added to "
     "every block cancels"),
    (r"outputs.*_write_all", r"umask\(1\)",
     "equivalent: the value stands only between reading the umask and restoring it"),
    (r"outputs.*(read_header|staying_imports)",
     r"read_bounded\(path, MAX_OUTPUT_BYTES, (None|\"XXgenerated fileXX\"|\"GENERATED FILE\")?\)",
     "equivalent: the name only words a FileRefused's message, which except OSError "
     "discards"),
    (r"outputs.*read_header", r"split\(b\"\\n\", (2)?\)\[0\]",
     "equivalent: only the part before the first newline is used"),
    (r"outputs.*_trailer", r"default=-2\)|match\.start\(\) >= last_def",
     "equivalent: a match starts at 0 or later, and __all__ and a def never start at "
     "the same offset"),
    # ------------------------------------------------------------------ derive
    (r"derive\.cse.*x_share", r"symbols=None",
     "equivalent: the temporaries are named afterwards (derive/cse.py _names, from the "
     "replacement list), so SymPy's default x0, x1, ... are never printed, and as "
     "symbols without assumptions they are never equal to an input (a real symbol)"),
    (r"derive\.context.*Derivation.*symbol", r"kind = |Symbol\(name, \)",
     "equivalent: the gradient function's own symbols (cotangents, targets) only "
     "multiply and add; no evaluation depends on their being real (every recorded op "
     "prints the same)"),
    (r"derive.*_elementwise_vjp", r"continue|break",
     "equivalent: expr == v means v is expr's only free symbol, so nothing follows"),
    (r"derive\.cse.*share", r"order=|numbered_symbols\(\"(XX_cseXX|_CSE)\"\)",
     "equivalent: SymPy's cse orders canonically for any order but 'none', and a "
     "temporary's prefix (any that starts with '_', which no input can) is renamed"),
    (r"derive.*_constants", r"and False",
     "equivalent: rebuilding an unchanged node gives an equal node (every recorded op "
     "prints the same); kept to leave nodes as built"),
    (r"derive.*_cheap_forms", r"p >= 0|p > 1",
     "equivalent: here p is odd with |p| >= 3"),
    (r"derive.*_check_printable|derive.*_partial", r"check_printable\(d, result, None|, None\)$",
     "unreachable: no derivative of the language holds these functions (the check is "
     "tested directly)"),
    (r"pipeline.*x_derive_op", r"^- None, / - \) / \+ \)$",
     "equivalent: None is the Diagnostic's default field"),
    (r"derive.*simplify_partial", r"count_ops\((None|c\[1\])\)",
     "not detected: of the two candidates (the partial as SymPy builds it and its "
     "factor_terms), the one with fewer operations also came first in SymPy's sort order "
     "on every partial tried; a pair where they disagree would kill it"),
    (r"derive\.cse.*share", r"symbols=None|^- symbols=sympy\.numbered_symbols\(\"_cse\"\),$"
     r"|numbered_symbols\(None\)",
     "equivalent: SymPy's default temporaries skip every symbol in the expressions, and "
     "temporaries are renamed after CSE (an input named None0 would be needed to tell "
     "numbered_symbols(None) apart)"),
    (r"derive\.reverse.*reverse", r"pop\(node\.symbol, None\)",
     "equivalent: None is falsy like [] (a node with no cotangent is skipped)"),
    (r"expr\.parser.*_Core.*__init__", r"",
     "equivalent: parse() sets key, name_hint and _root before anything reads them"),
    (r"expr\.syntax.*x_read_expression", r"ast\.Constant\((None|1)\)",
     "equivalent: the placeholder node only carries the error's position"),
    (r"expr\.syntax.*x_read_expression", r"e\.lineno or 2",
     "unreachable: a SyntaxError from ast.parse always has a line number"),
    (r"expr\.syntax.*x_read_expression", r"XX\\n\\tXX",
     "equivalent: 'X' is printable ASCII, allowed anyway"),
    (r"expr\.parser.*_Core.*_check_real_constants", r"evalf\((None|21)\)",
     "equivalent: the value is only tested for an imaginary part and printed to 6 digits"),
    # ------------------------------------------------------------------ stability
    (r"families\.cancellation.*_sqrt_conjugate", r"continue / \+ break",
     "equivalent: a number partner sorts before the root term in SymPy's order, and of "
     "two roots the later one finds the earlier, with the same result"),
    (r"families\.logsumexp.*_log_mul", r"force=",
     "equivalent: every factor is positive (positive_factors), so expand_log expands it "
     "with or without force"),
    (r"families\.powers.*_power_product", r"len\(exponents\) >= 1",
     "equivalent: one exponent gives back the same product"),
    (r"families\.sigmoid", r"power >= 0|exp <= 0|exp < 1",
     "equivalent: x**0 is 1 in SymPy, so no power 0 reaches the rule"),
    (r"stability\.guards\.branches.*guard_branches", r"or True|changed = None",
     "equivalent: And() drops a True argument, _safe_values(True) is {}, and None is "
     "falsy like False"),
    (r"stability\.guards\.(branches.*guard_branches"
     r"|singularities.*(_visit_branches|_fill_point|_polynomial_near_zero))",
     r"evaluate=None",
     "equivalent: Piecewise.__new__ evaluates only where evaluate is true, so None is "
     "False"),
    (r"stability\.guards\.singularities.*(_fill_point|_polynomial_near_zero)", r"evaluate=",
     "equivalent: evaluating this Piecewise changes nothing: its first value is not a "
     "Piecewise (the part with the pole is a sum or a product: taylor_polynomial has no "
     "series of a Piecewise), its condition (x != 0, |x*w| > h) is already canonical, "
     "and its second value, a number or a polynomial, never equals the first"),
    (r"stability\.guards\.singularities.*_visit_branches", r"evaluate=",
     "killed since the run: test_removable_singularities_keep_the_conditions_as_given"),
    (r"stability\.guards\.branches.*guard_branches", r"evaluate=",
     "not detected: SymPy's evaluation leaves every recorded guarded Piecewise as built; "
     "evaluate=False keeps it so where a condition could be merged (no case found)"),
    (r"stability\.guards\.singularities.*_visit_branches", r"p\[1\] is v|p\[0\] is not v",
     "equivalent: rebuilding the Piecewise unevaluated from unchanged pairs gives an "
     "equal one"),
    (r"stability\.guards\.singularities.*_fill_terms",
     r"len\(with_pole\) (>= 1|> 2)|or True",
     "equivalent: without other terms, part is e itself, which the fallback fills in "
     "(the condition saves computing its limit twice)"),
    (r"stability\.guards\.singularities.*_fill_factors", r"if others or poles",
     "equivalent: with no other factors the product is e itself, the fallback's case; "
     "with no pole factor the pole is inside an argument and is filled in there"),
    (r"stability\.reductions.*_Rewriter.*_map__mutmut_7$", r"",
     "killed since the run: "
     "test_a_dropped_operand_beside_a_rewritten_reduction_is_broadcast_from_it"),
    (r"stability\.reductions.*_Rewriter.*_map", r"leaves=None|expr=fn\(t\.expr\), \)",
     "equivalent: a where term's leaf set is not read after this pass (derive reads only "
     "the where terms' expressions: derive/lower.py, derive/text.py)"),
    (r"stability\.reductions.*(_map|_log_softmax)", r"leaves",
     "not detected: a rewritten program's leaf sets only decide where derive restores a "
     "broadcast that simplification dropped, and the rewritten nodes have the shapes of "
     "the nodes they replace, so no recorded case tells them apart"),
    (r"stability\.normalize.*scaled_exp", r"sign / k",
     "equivalent: sign is +1 or -1, so sign/k and sign*k have the same sign"),
    (r"stability\.match.*_exp_terms", r"sum\(2 for",
     "equivalent: a count of 2s is 0 exactly when the count of 1s is"),
    (r"hypot", r"sum\(2 for",
     "equivalent: a count of 2s is 0 exactly when the count of 1s is"),
    (r"stability\.guards\.taylor.*(taylor_polynomial|_series)", r"series\(standard\(expr\), v, None",
     "equivalent: SymPy's series takes x0=None as 0"),
    (r"guards\.taylor.*taylor_plan", r"q >= 0\]|q > 1\]",
     "equivalent: a term with q at most 1 gives a scale at most 1, and the scale is the "
     "largest of those and 1.0"),
    (r"stability\.guards\.singularities.*_vanishes", r"return True",
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
    # ------------------------------------------------------------------ audit
    (r"audit\.mirror\.x__(erf|erfc)__", r"np\.size\(x\)\) or True|np\.size\(None\)",
     "unreachable: the audit's points are never empty (the size test keeps "
     "np.vectorize from an empty input, which it refuses)"),
    (r"audit\.mirror\.x__(sigmoid|softplus|erf|erfc)__", r"",
     "equivalent: the NumPy value only decides where the result is NaN or inf; every "
     "finite one is replaced by mpmath's (_refine), and these mutants change no "
     "non-finite value"),
    (r"audit\.mirror.*_TF.*_x(logy|log1py|divy)", r"1\.0 \* x",
     "equivalent: the branch is taken where x is 0, and 1.0 * x is then 0 too (with x's "
     "sign)"),
    (r"audit\.mirror.*_TF.*(zeros_like|ones_like)", r"np\.shape\(None\)",
     "equivalent: a 0-d 0 or 1 broadcasts against the points wherever it is used"),
    (r"audit\.mirror.*_TF.*reduce_sum", r"keepdims=True",
     "equivalent: the stand-in ignores keepdims (every input has the points' shape)"),
    (r"audit\.mirror.*_refine", r"reshape\(-2\)|reshape\(None\)",
     "equivalent: NumPy reads any negative size (and None) as 'the rest', like -1"),
    (r"audit\.mirror.*_refine", r"finite = np\.isfinite\(c\)",
     "equivalent: where C's value is NaN or inf at finite arguments, mpmath's is "
     "complex, raises, or rounds to the same inf, so refining there changes nothing"),
    (r"stability\.formats.*(ordinal|_round_bfloat16)", r"dtype=None|astype\(None\)|, \)",
     "equivalent: the array already has that dtype here (the callers convert it), and "
     "the bit view converts back"),
    (r"audit\.measure.*compare", r"dtype=None|astype\(None\)|np\.asarray\(got, \)",
     "equivalent: the values are float64 already (the mirror returns float64)"),
    (r"audit\.measure.*compare", r"errstate",
     "equivalent: only silences warnings"),
    (r"audit\.measure.*compare", r"np\.where\((counted|ok), (exact|got|target), "
     r"(None|1\.0)\)",
     "equivalent: the placeholder at points that do not count is never read (those "
     "points are masked out after)"),
    (r"audit\.reference.*_evalf_function", r"precision=None|sympy\.Float\(a, \)"
     r"|prec \* 3\.32|\+ 6",
     "equivalent: a Float made from an mpf keeps its precision, and more digits than "
     "needed give the same value rounded to the dtype"),
    (r"audit\.reference.*_limit", r"step_bits = fmt\.precision \+ 65|\+ 129|- 128"
     r"|3 \* \(_start_prec|2 / \(_start_prec|_start_prec\(point\) - step_bits"
     r"|5 \* \(exponent|MAX_PREC / 2|MAX_PREC // 3|if m != 1\)",
     "equivalent: the step and the working precision are margins (any step far below "
     "an ulp, and any precision well above the step's, give the same limit)"),
    (r"audit\.reference.*_limit", r"\) / d\)|\) - mpmath\.ldexp",
     "equivalent: the directions' signs decide the limit, and negating every direction "
     "gives the same set of sides"),
    (r"audit\.reference.*_limit", r"kind = None|values\[1\]",
     "equivalent: the loop always runs (two directions at least) and sets kind, and "
     "the values agree to within the tolerance there"),
    (r"audit\.sample.*rng_for", r"digest\[:17\]|\], \)\)",
     "equivalent: another seed drawn as deterministically from the op (the sample "
     "differs, the audit's guarantees do not)"),
    (r"audit\.mirror.*_TF.*__init__", r'"is_inf": lambda x: None',
     "not detected: _logsumexp's maximum is inf only where an operand overflows at a "
     "finite input (2*x near the largest float); no audited test op has one"),
    (r"stability\.formats.*_magnitude_bits", r"astype\(None\)",
     "equivalent: bfloat16 bit patterns (below 2**16) are exact in float64, and "
     "ordinals are only subtracted and compared"),
    (r"audit\.reference.*_classify", r"abs\([ab]\) >= limit",
     "equivalent: only a value exactly at the rounding boundary past the largest float "
     "differs"),
    (r"audit\.reference.*_compile", r"cse=None|\"mpmath\"\], \)",
     "equivalent: common subexpression elimination only saves work"),
    (r"audit\.x_audit_op", r"round\(worst_bits, None\)",
     "not detected: explain would show the worst error rounded to a whole bit; the "
     "explain text is tested from hand-built audits"),
    (r"stability\.formats.*_round_bfloat16", r"np\.isnan\(a\), None",
     "equivalent: a NaN stays a NaN (None casts to float32's NaN); only its payload, "
     "which nothing reads, differs"),
    (r"stability\.formats.*neighbours", r"v\[0\] >= 0",
     "unreachable: bfloat16 (the emulated format) flushes, so its 0 returned above"),
    (r"(stability\.formats|audit\.mirror).*", r"errstate\(",
     "equivalent: NumPy then warns on overflow or an invalid value, and computes the "
     "same result"),
    (r"audit\.mirror.*_kernel", r"dtype=None\) for a in args|np\.array\(special\(\*values\), \)",
     "equivalent: special's value only decides where the result is NaN or inf (finite "
     "ones are mpmath's, _refine); in the dtype instead of float64 it is inf or NaN at "
     "the same points but within an ulp of the dtype's largest number"),
    (r"audit\.mirror.*_operand", r'x\.ndim == 0\)|isinstance\(x, np\.ndarray\) or '
     r'x\.dtype|"XXfiXX"',
     "equivalent: operands are our arrays, Python numbers and 0-d float or int arrays; "
     "these change only 0-d values of other kinds (complex, strings), which the "
     "printed code does not make"),
    (r"audit\.mirror.*__array_ufunc__", r"\(\*plain, \)",
     "equivalent: nothing passes ufunc keywords (out=, where=) to the mirror's arrays"),
    (r"audit\.mirror.*_TF.*reduce_sum", r"",
     "equivalent: the stand-in ignores axis and keepdims (every input has the points' "
     "shape: no broadcast axes, see the module docstring)"),
    (r"audit\.mirror.*Program.*run", r"raise MirrorError\((None|f\"helpers: \{type\(None)",
     "unreachable: the helpers are gradgen's own template, and compile (pragma: no cover)"),
    (r"audit\.mirror.*Program.*run", r"np\.asarray\((env\[o\]|local\[g\]), (dtype=None)?\)",
     "equivalent: the values are float16/float32 arrays whose every value float64 "
     "holds exactly, and compare converts them to float64 itself"),
    (r"audit\.sample.*thresholds", r"^- continue / \+ break$",
     "not detected: differs only for a call whose non-expression argument (an axis, a "
     "dtype name) comes before an expression argument holding a condition; the calls "
     "of audited (elementwise) ops are casts, whose one expression comes first"),
    (r"audit\.sample.*random_values", r"rng\.integers\(2, size=n\)",
     "equivalent: integers(2) is integers(0, 2), the same draws"),
    (r"audit\.sample.*random_values", r"signs != 1",
     "equivalent: a fair sign either way (each draw's sign flipped; no guarantee is "
     "about which sign a given draw takes)"),
    (r"audit\.sample.*random_values", r"astype\(None\)",
     "equivalent: astype(None) is astype(float64) in NumPy"),
    (r"audit\.sample.*x_sample", r"drawn\.astype\(None\)",
     "equivalent: astype(None) is astype(float64) in NumPy"),
    (r"audit\.x__num", r'"inf" if value (>= 0|> 1)',
     "equivalent: the value is +inf or -inf here (NaN and finite ones returned above)"),
    (r"audit\.x_seed_text", r"",
     "equivalent: another spelling of the same text seeds the sampler as "
     "deterministically from the forward as written (the points drawn differ, and "
     "generated/'s docstrings with them: gradgen check, outside this selection, "
     "catches that; the audit's guarantees do not change)"),
    (r"stability\.formats.*round", r"a\.astype\(None\)",
     "equivalent: _round_bfloat16 converts to float32 itself (float64 values of "
     "float32 are exact)"),
    (r"audit\.mirror.*_TF.*_t__", r"dtype=None\)|np\.asarray\(x, \)",
     "equivalent: fmt.round converts whatever it gets (Python numbers, bool, integer "
     "and float arrays) to the format"),
    (r"audit\.mirror.*_kernel", r"np\.asarray\(self\._t\(a\), \)|special\(\*values\), "
     r"dtype=None\)",
     "equivalent: special's value only decides where the result is NaN or inf (finite "
     "ones are mpmath's, _refine); in the dtype instead of float64 it is inf or NaN at "
     "the same points but within an ulp of the dtype's largest number"),
    (r"audit\.mirror.*_TF.*__init__", r"self\.newaxis = \"\"",
     "unreachable: tf.newaxis is printed only in matrix code (det's VJP, _cofactor), "
     "which is not audited"),
    (r"audit\.mirror.*_TF.*__init__", r'for name in \(|setattr\(self, name, None\)',
     "equivalent: the stand-ins take dtype arguments (cast, constant) and ignore them "
     "(every value already has the op's format); a misspelt name's attribute is only "
     "absent, and no audited op casts to that dtype"),
    (r"audit\.reference.*_classify", r"\(a >= 0\)|\(a > 1\)|\(b >= 0\)|\(b > 1\)",
     "equivalent: both values are past the largest float in magnitude here, so > 0, "
     ">= 0 and > 1 tell the same sign"),
    (r"audit\.reference.*_limit", r"_DIRECTIONS\[:3\]|\(len\(point\) > 1\) or True"
     r"|len\(point\) >= 1",
     "equivalent: with one input the third direction (0.75) approaches from the same "
     "side as the first (1.0), so it adds no side"),
    (r"audit\.reference.*_outputs", r"sizes\[target\] >= MAX_REFERENCE_SIZE",
     "not detected: only a tree of exactly 3000 nodes differs"),
    (r"audit\.reference.*_outputs", r"\(swap\) or True",
     "equivalent: xreplace of an empty mapping returns the expression"),
    (r"audit\.reference.*_outputs", r"'XX, XX'\.join",
     "not detected: the tests' references lack one name at a time, so the separator "
     "of several is not read"),
    (r"audit\.reference.*_start_prec", r"v != 1\)|default=1\)",
     "equivalent: 0 and 1 both give an exponent far below the floor of 128 bits "
     "(frexp(0) is 0, frexp(1) is 1)"),
    (r"audit\.reference.*Reference.*__init__", r"if s\.name not in by_name",
     "equivalent today: the IR's input symbols are real symbols of those names, equal "
     "to the reference's, so the swap is empty either way; it guards assumptions a "
     "spec may add"),
    (r"audit\.reference.*Reference.*_exact", r"^- out\[t\] = \(math\.nan, UNDEFINED\) / "
     r"\+ out\[t\] = None$",
     "equivalent: a value complex at the first precision is complex at the next, which "
     "then sets the same result (one evaluation later)"),
    (r"audit\.reference.*Reference.*_values", r"together = None|_call\(None, point"
     r"|_call\(self\._together, None",
     "equivalent: the one-by-one fallback gives the same values (all at once only "
     "saves work)"),
    (r"audit\.reference.*Reference.*evaluate", r"np\.full\(n, None\)|np\.zeros\(n, "
     r"(dtype=None)?\)|np\.asarray\(points\[s\.name\], (dtype=None)?\)"
     r"|\[undefined\] = None",
     "equivalent: every entry is written below; the points are float64 already; the "
     "classes are compared by value; None assigned into a float array is NaN"),
    (r"audit\.reference.*Reference.*evaluate", r"if \(columns\) or True|else 2$",
     "unreachable: an op without inputs has no differentiable input, so it is not "
     "audited"),
    # survivors of the audit sample that tests written after the run kill (each checked
    # with MUTANT_UNDER_TEST=<name> python -m pytest tests/test_audit.py in mutants/);
    # counted as not detected in the score
    (r"audit\.x_audit_op__mutmut_18$", r"",
     "killed since the run: test_ops_without_a_differentiable_input_are_not_audited"),
    (r"audit\.mirror.*Program.*run__mutmut_9$", r"",
     "killed since the run: test_printed_code_runs_with_only_the_allowed_builtins"),
    (r"audit\.measure.*compare__mutmut_79$", r"",
     "killed since the run: test_compare_float16_subnormals_both_below_tiny_count_as_exact"),
    # survivors of the 2026-12-06 full run, read after the third round of tests
    # (killed by tests written after the rerun, each checked by applying the mutant by
    # hand and running the test; counted as not detected in the score)
    (r"expr\.parser.*_Core.*_pow__mutmut_2$", r"",
     "killed since the run: test_expr.py ATTACKS, pi ** 1000000 * x"),
    (r"families\.powers.*_pole_at_zero__mutmut_8$", r"",
     "killed since the run: test_stable.py exp_power, a sum with 2 / x**2"),
    (r"derive\.reverse.*_operand_vjp__mutmut_98$", r"",
     "killed since the run: test_the_partials_of_a_keepdims_reduction_operand_name_it"),
    (r"shapes.*(DimFactory.*batch__mutmut_1|_broadcast_batched__mutmut_47)$", r"",
     "killed since the run: test_broadcast_of_two_batches_is_a_new_memoized_batch"),
    (r"guards\.taylor.*(_function_of_product__mutmut_2|_horner_in__mutmut_7)$", r"",
     "killed since the run: test_private_function_of_product_and_horner_in"),
    (r"guards\.taylor.*_function_of_product", r"\(w \* u\)\.?",
     "equivalent: w**r cancels against the leading coefficient either way, and u**(2r) "
     "more leaves a function of u alone a function of u alone"),
    (r"guards\.singularities.*(_by_inputs__mutmut_23|_fill_terms__mutmut_40)$", r"",
     "killed since the run: "
     "test_terms_left_as_written_still_have_their_own_singularities_filled"),
    (r"derive\.forward.*forward_call", r"args\[:2\]",
     "equivalent: a broadcast to a static shape has one operand"),
    (r"derive\.matrix.*einsum", r"if \(cplx\) or True",
     "equivalent: SymPy's conjugate of a real operand is the operand"),
    (r"derive\.reverse.*_operand_vjp", r"shape_of\.get\(arg, (None)?\)",
     "unreachable: every operand has a shape in shape_of, so the default is never used"),
    (r"derive\.text.*node_text", r"'XX, XX'",
     "equivalent: transpose, inverse, det and trace have one operand, so the separator "
     "is never written"),
    (r"derive\.text.*_print_Or", r"\" or \", \)",
     "equivalent: an or's operands (and, not, comparisons) bind tighter than or"),
    (r"expr\.parser.*_Core.*_constant_value", r"None, f\"the constant",
     "equivalent: the error's position is the one the caller's node gives (checked: the "
     "same line and column)"),
    (r"expr\.parser.*_Core.*_operator", r"ast\.Constant\((None|1)\)",
     "equivalent: only the placeholder node's position is read"),
    (r"expr\.parser.*_Core.*_operator", r"col is not None or line <=",
     "unreachable: a parsed BinOp's operator is in the text after its left operand, so "
     "the search finds it before passing the last line"),
    (r"expr\.tensors.*_square_node", r"\"XXXX\"",
     "equivalent: the default's kernel text is read only where its list of lacking "
     "dtypes, empty, is not"),
    (r"stability\.families\.xlogy.*_underflows_at_zero", r"isinstance\(g, xlogy\) or",
     "equivalent: atoms(xlogy) yields only xlogy calls"),
    (r"guards\.branches.*_clamped_branch_alone", r"\+ break",
     "equivalent: where the first branch fails the clamp check the second is the "
     "number, with no guards, which the next pass skips anyway"),
    (r"guards\.(branches.*_one_sided|taylor.*_function_of_product)",
     r"Dummy\((None, |\"XX[uv]XX\", |\"[UV]\", |)real=True\)",
     "equivalent: a Dummy's name is never shown, and Dummies are unique by identity"),
    (r"guards\.products.*_polynomial_bound", r"isinstance\(e, sympy\.Function\)\) or True",
     "equivalent: no declared function is a Symbol, Add, Mul or Pow, so of_class finds "
     "no bound for them"),
    (r"guards\.products.*_polynomial_bound", r"e\.exp (<= 0|< 1):",
     "equivalent: x**0 is 1 in SymPy, never a Pow"),
    (r"guards\.products.*_polynomial_in", r"degree\(\) >= 0",
     "equivalent: a constant polynomial has no free symbols, which the test before "
     "refuses"),
    (r"guards\.products.*_zero_is_right",
     r"workdps\(51\)|range\(201\)|\) > top else|value <= tiny|value > edge",
     "equivalent: one more digit or bisection step, or a tie at exactly the smallest "
     "normal number or the edge, which a 50-digit product does not hit"),
    (r"guards\.products.*_zero_is_right", r"\"mpmath\", (printer=None)?\)",
     "equivalent for the decision: lambdify's own mpmath printer differs from the pinned "
     "one only under global printing settings, which reorder a sum's terms: a rounding "
     "difference at mpmath's working precision, far below the thresholds checked"),
    (r"guards\.products.*_zero_is_right", r"SOUNDNESS_POINTS \+ 2",
     "equivalent for inputs: the extra point lies beyond the largest finite number"),
    (r"guards\.products.*_zero_is_right__mutmut_78$", r"",
     "killed since the run: test_private_zero_is_right_needs_every_50_digit_product"),
    (r"expr\.parser.*_Core.*_constant_value", r"evalf\((None|21)\)",
     "equivalent: only whether the imaginary part is 0 is read (and 6 digits of it), and "
     "evalf computes each part to a relative precision: an exact 0 is 0 at every "
     "precision, the noise of a 0 SymPy cannot prove is not (I*(sin(1)**2 + cos(1)**2 - "
     "1): 4e-140j at 15 digits, 6e-151j at 20, 9e-131j at 21)"),
    (r"expr\.parser.*_Core.*_constant_value", r"type\(None\)",
     "killed since the run: test_an_evaluation_error_without_words_is_named_by_its_type "
     "(which found `e or ...` never fell back: errors.error_text now)"),
    (r"guards\.taylor.*_function_of_product", r"real=(None|False)\)|Dummy\(\"u\", \)",
     "equivalent: what is read is whether the other inputs are gone after v = u / w, and "
     "they cancel through products, which Abs, sign and powers split whatever u's "
     "assumptions; u's realness changes only how functions of u alone simplify (15 forms "
     "with Abs, sign, Max, Piecewise, floor, roots: the same answer with u real, "
     "unassumed and non-real)"),
    (r"guards\.taylor.*_function_of_product__mutmut_21$", r"",
     "killed since the run: test_private_function_of_product_and_horner_in"),
    (r"derive\.reverse.*_operand_vjp__mutmut_28$", r"",
     "equivalent: the shape of a contribution with a wide value is read nowhere: "
     "unbroadcast.accumulate sums such a contribution by its value or wide value alone, "
     "outside the groups by shape, and reverse.py describes only those without one"),
]

# tools/mutate_templates.py: (regex over "line N: `before` -> `after`", reason)
TEMPLATE_REASONS = [
    (r"isinstance\(want, int\) or got is None",
     "equivalent: tf.ensure_shape with sizes the tensor already has statically is a no-op"),
    (r"len\(sizes\) <= len\(places\)",
     "equivalent: a run-time check of sizes already equal statically passes"),
    (r"(x >= -0.69|a <= 1.0|x > _ERFCX_ASYMPTOTIC_FROM|x <= _ERFCX_OVERFLOW_BELOW)",
     "equivalent to within the tests' tolerance: at the switch point itself both forms "
     "are accurate"),
    (r"_ERFCX_SERIES\[(-2\]|:-2\])|/ tf.ones_like",
     "equivalent to within float64 rounding: the series' last term is below an ulp from "
     "x = 10 on (0.005**12 * 3.2e11 = 8e-17), and dividing by one changes nothing"),
    (r"(a\.shape|tf\.shape\(a\))\[-2\]",
     "equivalent: the matrix is square"),
    (r"singular = .*(/ eps|s\[\.\.\., 1\])",
     "not detected: the threshold only picks between two correct cofactor formulas (the "
     "adjugate from the SVD near singular matrices); a wrong threshold costs accuracy "
     "only for nearly singular matrices the tests do not reach with it"),
]
