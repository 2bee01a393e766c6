"""The golden record of the obsctl CLI (harness.py), imported as ``golden_cli`` (tests/ is on pytest's pythonpath)."""
