"""One scheduling cycle (order -> place -> actuate), shared by pald and the simulator."""
