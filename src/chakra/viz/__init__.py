"""Pictures of Chakra traces: dependency graphs, timelines, plots and the HTML report."""
