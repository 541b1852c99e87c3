"""The supervised warm start (``harness sft``, ``run --warm-start``): demonstrations from the
family's training set (``data``), the cached model folder and its key (``cache``), and the
training loop on the policy's DeepSpeed engine (``sft``)."""
