"""One streaming verifier per property of the control machine (see ``docs/control.md`` §7).

Each verifier is fed every step record in order (``observe``) and then asked for its verdict
(``report``), so a trace of millions of steps is checked in O(1) memory.
"""
