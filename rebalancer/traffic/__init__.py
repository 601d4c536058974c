"""The traffic stage: the PromQL a cycle sends, the answer parsed, and samples mapped to pods."""
