"""Helpers shared by the test tiers (on sys.path through pytest's ``pythonpath``):
servers with backfilled history and a readiness barrier, ``promtool test rules``
evaluation, one polling helper, fixture data builders, stand-ins and fault tools."""
