"""From runs to evidence: statistics, paired comparisons, the paper's claims and their verdicts,
tables and figures. Reads result frames; runs nothing."""
