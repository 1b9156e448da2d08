"""The cost model of formulations/model.md: the stage arithmetic written once
(``stagecost``), the reference and batched evaluators (``evaluator``), dollars and
grams (``tariffs``), objectives as sort keys (``objective``), the discrete-event
simulator that is the schedule's semantics (``simulate``) and the fit to measured
runs (``calibrate``)."""
