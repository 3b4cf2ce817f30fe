"""tecb_eval: evaluate embedding models x clustering algorithms x reductions on the benchmark."""
