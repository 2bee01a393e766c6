"""The command room: the click commands of the loop (one module per command group).

Each command parses its options, calls the stage below it and prints through
:mod:`obsctl.baselining.text`; nothing else imports this room.
"""
