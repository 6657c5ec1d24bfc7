"""The checklist checker: static checks read the code with `ast`; run checks a finished run directory."""
