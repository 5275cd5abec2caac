"""Mark the pending mutants of a cosmic-ray session that do not compile as skipped.

cosmic-ray's binary-operator replacement also rewrites the ``*`` of a keyword-only marker
and the ``**`` of a dict unpacking (``def f(self, *, x)`` -> ``def f(self, /, x)``,
``{**a}`` -> ``{%a}``): the mutant is a syntax error, "killed" by any test at import, and
each costs a full test start. ``nox -s mutants`` runs this before ``cosmic-ray exec``.

Usage: ``python .ci/mutants_skip_uncompilable.py SESSION.sqlite`` (in the mutated tree).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

from cosmic_ray.mutating import mutate_code
from cosmic_ray.plugins import get_operator
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult


def main(db_path: str) -> int:
    """Skip every pending work item whose mutated module fails to compile; print the count."""
    skipped = 0
    with use_db(db_path, WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            for mutation in item.mutations:
                source = Path(mutation.module_path).read_text(encoding="utf-8")
                operator = get_operator(mutation.operator_name)(**mutation.operator_args)
                mutated = mutate_code(source, operator, mutation.occurrence)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", SyntaxWarning)  # `is` with a literal
                        compile(mutated or source, str(mutation.module_path), "exec")
                except SyntaxError as exc:
                    result = WorkResult(
                        output=f"Filtered: the mutant does not compile ({exc.msg})",
                        worker_outcome=WorkerOutcome.SKIPPED,
                    )
                    db.set_result(item.job_id, result)
                    skipped += 1
                    break
    print(f"skipped {skipped} mutant(s) that do not compile")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
