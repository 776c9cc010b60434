"""The static rewriter behind ``python -m compat.migrate`` (libcst; never imports torch).

One run, in data-path order: ``cli`` (options, config, parallel run, exit codes) ->
``discovery`` (the files, ruff-style) -> ``files`` (one path: its per-suffix reader, the
atomic write-back) -> ``sources`` / ``notebook`` (bytes of a Python file or of a notebook's
cells, decoded with ``textio``) -> ``core`` (the text core: findings and fixed text, no file
system) -> ``analysis`` (the ``ast`` pass, calling the hooks ``registry`` collects from
``rules/``) -> ``splice`` / ``fixer`` / ``verify`` (libcst edits of the touched statements,
checked to change nothing else) -> ``output`` (text, JSON, SARIF, GitHub). ``ledger`` reads
the shim's ledgers for evidence; ``model`` holds findings, edits and results.
"""
