"""Run reports: report.md with a run's final metrics, figures, config and environment,
written at the end of every run (run_report.py); and a report comparing runs side by
side (comparison.py).

    python -m src.report RUN_DIR             # (re)write that run's report.md
    python -m src.report RUN_DIR RUN_DIR...  # compare them: config differences, metrics, curves

Importing this package loads no plotting library; its modules do.
"""
