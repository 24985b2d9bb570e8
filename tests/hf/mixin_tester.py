"""transformers' own ``ModelTesterMixin`` against the class an ``aot export hf`` folder ships. Not collected by the
project's pytest: tests/hf/test_transformers_mixin.py runs it in a pytest of its own, with the pinned transformers'
``tests/test_modeling_common.py`` (from its source distribution) importable as the package ``transformers_tests``
and the export's folder in ``AOT_MIXIN_EXPORT``.

The mixin's own flags say what does not apply to an aot model; each is set below with the reason, and the test that
runs this file checks that every skip it reports is one of these.
"""

from __future__ import annotations

import os
import unittest

from transformers.dynamic_module_utils import get_class_from_dynamic_module
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
from transformers_tests.test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask

EXPORT = os.environ["AOT_MIXIN_EXPORT"]
AotForCausalLM = get_class_from_dynamic_module("modeling_aot.AotForCausalLM", EXPORT)
AotConfig = get_class_from_dynamic_module("configuration_aot.AotConfig", EXPORT)
# The mixin knows a causal LM by transformers' table of names (model type -> class name), which lists transformers'
# own models; a model registered from outside (`import aot.hf`: AutoModelForCausalLM.register) is not in it. Listed,
# the mixin gives it labels and runs its causal-LM tests (training, gradient checkpointing, shift_labels).
MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[AotConfig.model_type] = AotForCausalLM.__name__


class AotModelTester:
    """What the mixin reads from a model tester: the sizes and ``prepare_config_and_inputs_for_common``."""

    def __init__(self, parent: unittest.TestCase) -> None:
        self.parent = parent
        self.config = AotConfig.from_pretrained(EXPORT)
        self.batch_size = 13
        self.seq_length = 7
        self.is_training = True
        self.vocab_size = self.config.vocab_size
        self.hidden_size = self.config.hidden_size
        self.num_hidden_layers = self.config.num_hidden_layers
        self.num_attention_heads = self.config.num_attention_heads
        self.pad_token_id = 0

    def get_config(self):  # type: ignore[no-untyped-def]
        return AotConfig.from_pretrained(EXPORT)

    def prepare_config_and_inputs_for_common(self):  # type: ignore[no-untyped-def]
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


class AotModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (AotForCausalLM,)
    # transformers' GenerationTesterMixin is not in the pinned version's source distribution (tests/generation/ is
    # left out of it): tests/hf/test_hf_features.py covers generate instead
    all_generative_model_classes = ()
    # the positions are a block_size x d table (learned) or rotary: aot has no resize_position_embeddings
    test_resize_position_embeddings = False
    # the mixin runs its check of _init_weights only on models it dates after 2022 (by a copyright line aot's files
    # lack); AotForCausalLM._init_weights is aot's initialisation, so run it
    test_can_init_all_missing_weights_before_2023 = True

    def setUp(self) -> None:
        self.model_tester = AotModelTester(self)
