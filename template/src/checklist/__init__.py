"""The checklist compliance checker: `python -m src.checklist [RUN_DIR ...]`. Static checks
read the code with `ast` (nothing is imported, torch is not needed); run checks read a
finished run directory. Items are named by their CHECKLIST IDs."""
