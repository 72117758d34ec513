"""The result store: one folder per run, a manifest and Parquet tables written atomically, one part
per finished case (docs/DESIGN.md section 9).

Start with ``schema`` (the tables' columns and closed value sets, run and case ids), then
``writer`` (``RunWriter``) and ``reader`` (``load_run``, which trusts the manifest, never a
listing). ``rows`` is what a case produced and how a failure becomes rows; ``files`` the atomic
files, the manifest, the lock and the free-space check.
"""
