"""Run by tests/hf/test_standalone.py in a Python that cannot import aot (``python -I -S``: no site, so no editable
install; the venv's site-packages are added by hand): loads each export with transformers alone and writes what it
computed to RESULT (JSON) for the test to compare with aot's own numbers.

    python -I -S load_without_aot.py SITE_PACKAGES REQUEST RESULT
"""

import importlib.util
import json
import sys

site_packages, request_path, result_path = sys.argv[1:4]
sys.path.append(site_packages)
if importlib.util.find_spec("aot") is not None:
    raise SystemExit("aot is importable: this check must run where it is not")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline  # noqa: E402

with open(request_path, encoding="utf-8") as f:
    request = json.load(f)
results = {}
for export in request["exports"]:
    got: dict = {}
    try:  # without trust_remote_code (and stdin closed, so transformers cannot ask)
        AutoModelForCausalLM.from_pretrained(export)
    except ValueError as error:
        got["refusal"] = str(error)
    model = AutoModelForCausalLM.from_pretrained(export, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(export, trust_remote_code=True)
    ids = tokenizer(request["text"], return_tensors="pt").input_ids
    with torch.no_grad():
        got["ids"] = ids[0].tolist()
        got["logits"] = model(ids).logits[0].tolist()
        got["greedy"] = model.generate(ids, max_new_tokens=request["new"], do_sample=False)[0, ids.shape[1] :].tolist()
    got["module"] = type(model).__module__
    generator = pipeline("text-generation", model=export, trust_remote_code=True)
    got["pipeline"] = generator(request["text"], max_new_tokens=8, do_sample=False)[0]["generated_text"]
    got["decoded"] = tokenizer.decode(got["ids"] + got["greedy"][:8])
    results[export] = got
with open(result_path, "w", encoding="utf-8") as f:
    json.dump(results, f)
