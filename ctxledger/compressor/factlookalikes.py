"""Names that look like paths but are code or a formula (read by :mod:`.factpaths`).

``hits/self.total`` is a division and ``w_i\\cdot\\log`` a LaTeX formula, though each
has the shape of a path (a file under a directory, a relative Windows path without
an extension): the word lists here tell them apart.
"""

from __future__ import annotations

__all__ = ["TEX_COMMANDS", "division"]

#: LaTeX commands that stand between names as a path's directories would
#: (``w_i\\cdot\\log``, ``x_i\\cdot\\sigma``): a formula, no path
TEX_COMMANDS = frozenset(
    [
        "cdot",
        "times",
        "log",
        "ln",
        "exp",
        "sin",
        "cos",
        "tan",
        "sum",
        "prod",
        "int",
        "frac",
        "sqrt",
        "partial",
        "nabla",
        "infty",
        "sigma",
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "theta",
        "lambda",
        "mu",
        "pi",
        "rho",
        "tau",
        "phi",
        "psi",
        "omega",
        "mathbb",
        "mathrm",
        "mathbf",
        "mathcal",
        "left",
        "right",
        "ldots",
        "cdots",
        "leq",
        "geq",
        "neq",
        "approx",
    ]
)


#: names that stand before an attribute in code and never name a directory's file
#: (``self.total``, ``np.sqrt``); module names such as ``os`` or ``time`` are left out
#: (``deploy/os.release``, ``src/time.prisma`` are files)
CODE_OBJECTS = frozenset(
    [
        "self",
        "cls",
        "this",
        "np",
        "pd",
        "df",
        "torch",
        "tf",
        "nn",
        "jnp",
        "plt",
    ]
)
#: attributes a computation divides by, rarely a file's extension
CODE_ATTRIBUTES = frozenset(
    [
        "sum",
        "mean",
        "total",
        "sqrt",
        "size",
        "shape",
        "count",
        "max",
        "min",
        "len",
        "std",
        "var",
        "abs",
        "exp",
        "log",
        "item",
        "values",
        "value",
        "norm",
        "numel",
    ]
)


def division(left: str, right: str) -> bool:
    """Whether ``left/right`` (a name, then a dotted name without a known extension)
    reads as a division in code: ``hits/self.total``, ``a/np.sqrt``, ``df/df.sum``,
    ``km/h.ok`` (an object of one letter, a usual receiver, or an attribute a
    computation takes), not as a file under a directory (``a/schema.prisma``,
    ``docs/docs.prisma``). `left` is not judged: a one-letter directory or one named
    like the file is as common as a one-letter variable."""
    obj, _, attribute = right.partition(".")
    return (
        len(obj) < 2
        or obj.lower() in CODE_OBJECTS
        or attribute.split(".")[0].lower() in CODE_ATTRIBUTES
    )
