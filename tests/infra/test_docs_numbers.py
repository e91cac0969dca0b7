"""The counts `tests/unit/test_docs_numbers.py` reads from the source, held to the session's
synthesized templates: the docs quote the source's counts, and these are what `cdk synth` makes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit import test_docs_numbers as docs


def test_the_source_counts_are_what_the_templates_hold(cloud_assembly: Path):
    templates = [json.loads(p.read_text()) for p in sorted(cloud_assembly.glob("*.template.json"))]
    assert len(templates) == docs.stacks()
    engine_functions = [
        resource
        for template in templates
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and str(resource["Properties"].get("Handler", "")).startswith("hybridsync.functions.")
    ]
    assert len(engine_functions) == docs.functions()
