"""The pure decision core (supervision/_core.py and its rules), on a fake executor and clock."""
