"""The lab: the command line, the benches, the paper's reports and figures, and `explain`."""
