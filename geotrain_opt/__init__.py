"""geotrain_opt: plan foundation-model training on heterogeneous, geo-distributed GPUs."""
from .errors import GeoTrainError, InstanceError, PlanError, SolverError
from .evaluator import BatchEvaluator, Evaluation, evaluate
from .instance import Instance, instance_from_dict, load_instance
from .plan import Plan
from .result import SolverResult

__version__ = "0.1.0"
__all__ = ["BatchEvaluator", "Evaluation", "GeoTrainError", "Instance", "InstanceError", "Plan",
           "PlanError", "SolverError", "SolverResult", "evaluate", "instance_from_dict", "load_instance"]
