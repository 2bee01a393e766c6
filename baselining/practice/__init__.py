"""The practice room: the weekly review, drift and movement, the targets, the ledger, publishing."""
