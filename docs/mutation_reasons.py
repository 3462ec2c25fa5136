"""Why a mutant survives: (mutant name regex, changed-lines regex, reason), first match
wins; read by tools/mutation_report.py. Only reasons checked by reading the code."""

REASONS = [
    (r"printer.*_number", r"evalf\((31|None)\)",
     "equivalent: the 30-digit value is only tested for finiteness and an imaginary part"),
    (r"printer.*_number", r"q - 2",
     "equivalent: for a denominator q >= 2, q & (q-2) == 0 exactly when q is a power of 2"),
    (r"printer.*_number", r"p <= 0|p < 1",
     "equivalent: p is a nonzero integer here (the rational is not an integer)"),
    (r"printer.*_print_Pow", r"rational=True", "equivalent: the parameter is unused"),
    (r"printer.*_print_Pow", r"exp <= 0|exp < 1",
     "equivalent: x**0 is 1 in SymPy and never reaches the printer"),
    (r"expr.*visit_Compare", r"or True|>= 1",
     "equivalent: And() of one relational is that relational"),
    (r"expr.*_ExprError.*__init__", r"super", "equivalent: str() of the error is never used"),
]
