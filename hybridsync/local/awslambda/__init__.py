"""Lambda, locally: each function's worker processes (`functions`, `bootstrap`, `context`), the
event source mappings (`mappings`) and the Lambda API (`responses`). Named as moto names it (`lambda`
is a keyword)."""
