# SPDX-License-Identifier: MIT
# torch._dynamo.utils.counters: torch.compile counts the frames it compiled in counters["frames"].
import collections

counters = collections.defaultdict(collections.Counter)
