"""Files and people: summaries (``describe``), exports of plans and models for
other tools, output files written whole (``outputs``), figures (``plots``), the
instance generator and the provenance stamped on results."""
