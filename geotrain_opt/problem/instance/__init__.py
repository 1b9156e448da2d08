"""Instances: loading (YAML/JSON), validation with field-named errors, SI arrays.

The front of five parts, each with one job: ``fields`` (the allowed fields,
ranges and typed reading), ``records`` (the dataclasses, :class:`Instance`),
``network`` (links to the alpha/beta matrices), ``arrays`` (the SI arrays the
evaluator reads: everything a solver needs is precomputed once, because the
evaluator is the hot loop of every solver) and ``loading`` (file to instance).
"""
from __future__ import annotations

from geotrain_opt.problem.instance.arrays import InstanceArrays
from geotrain_opt.problem.instance.fields import (BATCH_SPLITS, INT_MAX, LIMITS, MAX_DEVICES, OBJECTIVES,
                                                  SCHEDULES)
from geotrain_opt.problem.instance.loading import (check_whole_model_fits, instance_from_dict, load_instance,
                                                   parse_text, read_text_file)
from geotrain_opt.problem.instance.network import nic_inv_share
from geotrain_opt.problem.instance.records import Device, Instance, Model, Objective, Options

__all__ = ["BATCH_SPLITS", "INT_MAX", "LIMITS", "MAX_DEVICES", "OBJECTIVES", "SCHEDULES", "Device", "Instance",
           "InstanceArrays", "Model", "Objective", "Options", "check_whole_model_fits", "instance_from_dict",
           "load_instance", "nic_inv_share", "parse_text", "read_text_file"]
