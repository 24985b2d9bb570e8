"""The one thing pyproject.toml cannot say: the wheel ships ``aot-plugins.pth`` at its root (site-packages once
installed), whose one line imports ``_aot_plugins`` at start-up, which registers aot's models in timm and lm-eval
when those are imported (src/_aot_plugins.py; ``AOT_NO_PLUGINS=1`` turns it off).

A regular wheel (``pip install .``, ``pip wheel .``): ``build_py`` writes the file into ``build_lib`` beside the
packages. An editable install (``pip install -e .``, PEP 660): setuptools runs ``build_py`` in editable mode and
puts only a path ``.pth`` (to src/) in the wheel, leaving what ``build_py`` wrote aside; what its install step's
``install_lib`` holds (the unpacked editable wheel, where setuptools writes the files that are not editable: data,
headers, scripts) goes into the wheel, so the file is written there too.
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "aot-plugins.pth"
PTH_LINE = "import _aot_plugins\n"  # site.py executes a .pth line that starts with "import"


class build_py_with_pth(build_py):  # lower case, as setuptools names its commands
    def run(self) -> None:
        super().run()
        where = self.build_lib
        if getattr(self, "editable_mode", False):
            where = self.get_finalized_command("install").install_lib
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, PTH), "w", encoding="utf-8") as file:
            file.write(PTH_LINE)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            outputs.append(os.path.join(self.build_lib, PTH))
        return outputs


setup(cmdclass={"build_py": build_py_with_pth})
