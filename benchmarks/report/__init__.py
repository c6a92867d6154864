"""The generated documents: REPRODUCTION.md (`reproduction`), BEYOND.md (`beyond`) and the learned
stop policies' section (`learned`)."""
