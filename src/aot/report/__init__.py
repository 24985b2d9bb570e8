"""``aot reproduce``: the paper's experiments at a size that fits the machine, in one report beside the paper's
numbers (``report.md`` and a self-contained ``index.html``).

- :mod:`aot.report.paper_numbers` — the paper's numbers, the one place they are written;
- :mod:`aot.report.part` — what a part is (its commands per preset, how it collects and renders results);
- :mod:`aot.report.parts` — the registered parts, one module each (how to add one is documented there);
- :mod:`aot.report.execute` — runs the parts (keyed skipping, failures recorded, Ctrl-C safe);
- :mod:`aot.report.document` / :mod:`aot.report.build` — the report as data, rendered to Markdown and HTML;
- :mod:`aot.report.browser` — the headless-chromium check of the page (screenshot, images, console);
- :mod:`aot.cli.reproduce` — the ``aot reproduce`` command.
"""
