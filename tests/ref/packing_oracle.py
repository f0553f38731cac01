"""packing_oracle.py: OLMo-core's packed instances, transcribed from its code (OLMo-core
fa6c5014) with Debian's numpy and Python's own random, the oracle of tests/test_packing.py
for src/data/packing.c:
  - the file permutation: NumpyDatasetConfig._resolve_paths_metadata (numpy_dataset.py:
    2465-2468): order = list(range(n)); random.Random(source_permutation_seed).shuffle(order);
  - the groups: NumpyPackedFSLDataset.__init__ (chunked(self.paths, source_group_size));
  - the documents: iter_document_indices (no BOS: the EOS positions of the array) and
    iter_document_indices_with_max_sequence_length (truncate / fragment), data/utils.py;
  - the packing: pack_documents_into_instances, InstancePacker, SegmentTree (data/utils.py),
    literally, with one switch: the sort kind of np.argsort (None = numpy's default, as
    OLMo-core calls it; "stable" = olmo.c's stated tie rule, equal lengths in document order);
  - the instance: NumpyPackedFSLDataset.__getitem__ (documents looked up through the group's
    files, padded with pad_token_id, label_mask False on the padding) and
    get_document_lengths (doc_lens, no BOS), in numpy instead of torch;
  - the global order: np.random.Generator(PCG64(seed + epoch)).shuffle(arange(N, uint32))
    (data_loader.py, NumpyFSLDataLoader._build_global_indices).
Not a test itself."""
import hashlib
import math
import random
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np


def permutation(n, seed):
    order = list(range(n))
    if seed is not None:
        rng = random.Random(seed)
        rng.shuffle(order)
    return order


def chunked(items, n):
    items = list(items)
    return [items[i:i + n] for i in range(0, len(items), n)]


def iter_document_indices(tokens, eos):
    doc_boundaries = (tokens == eos).nonzero()[0]
    start_idx = 0
    for idx in doc_boundaries:
        end_idx = idx + 1
        yield start_idx, end_idx
        start_idx = end_idx


def iter_document_indices_with_max_sequence_length(tokens, max_sequence_length, eos, long_doc_strategy):
    for start_idx, end_idx in iter_document_indices(tokens, eos):
        if end_idx - start_idx > max_sequence_length:
            if long_doc_strategy == "truncate":
                yield start_idx, start_idx + max_sequence_length
            elif long_doc_strategy == "fragment":
                for new_start_idx in range(start_idx, end_idx, max_sequence_length):
                    yield new_start_idx, min(end_idx, new_start_idx + max_sequence_length)
            else:
                raise NotImplementedError(long_doc_strategy)
        else:
            yield start_idx, end_idx


@dataclass
class SegmentTreeNode:
    weight: int = 0
    parent: Optional["SegmentTreeNode"] = None
    children: Optional[Tuple["SegmentTreeNode", "SegmentTreeNode"]] = None
    leaf_id: Optional[int] = None

    @property
    def is_leaf(self) -> bool:
        return self.children is None

    def update(self, weight: Optional[int] = None):
        if weight is not None:
            assert self.is_leaf
            self.weight = weight
        else:
            assert self.children is not None
            self.weight = max(self.children[0].weight, self.children[1].weight)
        if self.parent is not None:
            self.parent.update()


class SegmentTree:
    def __init__(self, N: int):
        assert math.log2(N) % 1 == 0, "N should be a power of 2"
        self.root_node = SegmentTreeNode()
        self.leaf_nodes: List[SegmentTreeNode] = []
        max_depth = int(math.log2(N))
        leaf_id = 0
        queue = deque([(self.root_node, 0)])
        while queue:
            parent, depth = queue.popleft()
            if depth < max_depth:
                parent.children = (SegmentTreeNode(parent=parent), SegmentTreeNode(parent=parent))
                queue.append((parent.children[0], depth + 1))
                queue.append((parent.children[1], depth + 1))
            else:
                parent.leaf_id = leaf_id
                self.leaf_nodes.append(parent)
                leaf_id += 1
        assert len(self.leaf_nodes) == N
        self.leaf_nodes[-1].update(N)

    def query(self, weight: int) -> SegmentTreeNode:
        node = self.root_node
        while not node.is_leaf:
            assert weight <= node.weight
            left_child, right_child = node.children
            node = left_child if weight <= left_child.weight else right_child
        return node


class InstancePacker:
    def __init__(self, max_sequence_length: int, sort_kind=None):
        self.max_sequence_length = max_sequence_length
        self.sort_kind = sort_kind
        self.seg_tree = SegmentTree(max_sequence_length)
        self.instance_bins: List[List[int]] = []
        self.space_to_bins: Dict[int, deque] = defaultdict(deque)

    @property
    def total_padding(self) -> int:
        return sum(i * len(self.space_to_bins[i]) for i in range(1, self.max_sequence_length) if i in self.space_to_bins)

    @property
    def total_tokens(self) -> int:
        return self.max_sequence_length * len(self.instance_bins) - self.total_padding

    def _pack_document(self, document_id: int, document_length: int) -> int:
        best_fit_leaf_id = self.seg_tree.query(document_length).leaf_id
        best_fit_capacity = best_fit_leaf_id + 1
        if best_fit_capacity == self.max_sequence_length:
            self.instance_bins.append([])
            bin_id = len(self.instance_bins) - 1
        else:
            bins = self.space_to_bins[best_fit_capacity]
            bin_id = bins.popleft()
            if len(bins) == 0:
                self.seg_tree.leaf_nodes[best_fit_capacity - 1].update(weight=0)
        self.instance_bins[bin_id].append(document_id)
        bin_space = best_fit_capacity - document_length
        if bin_space > 0:
            bins = self.space_to_bins[bin_space]
            if len(bins) == 0:
                self.seg_tree.leaf_nodes[bin_space - 1].update(weight=bin_space)
            self.space_to_bins[bin_space].append(bin_id)
        return bin_id

    def pack_documents(self, document_indices: np.ndarray):
        document_lengths = document_indices[:, 1] - document_indices[:, 0]
        if self.sort_kind is None:   # OLMo-core: numpy's default kind (quicksort, not stable)
            sorted_index = np.argsort(-1 * document_lengths.astype(np.int64))
        else:
            sorted_index = np.argsort(-1 * document_lengths.astype(np.int64), kind=self.sort_kind)
        document_indices = np.take(document_indices, sorted_index, axis=0)
        for document_id, (start_idx, end_idx) in enumerate(document_indices):
            self._pack_document(document_id, int(end_idx - start_idx))
        return self.instance_bins, document_indices, self.total_tokens


def pack_documents_into_instances(arrays, max_sequence_length, eos, long_doc_strategy, sort_kind):
    def doc_idx_gen():
        start_offset = 0
        for tokens in arrays:
            for s, e in iter_document_indices_with_max_sequence_length(tokens, max_sequence_length, eos, long_doc_strategy):
                yield start_offset + s
                yield start_offset + e
            start_offset += tokens.shape[0]

    document_indices = np.fromiter(doc_idx_gen(), dtype=np.uint64).reshape(-1, 2)
    return InstancePacker(max_sequence_length, sort_kind).pack_documents(document_indices)


def get_document_lengths(input_ids, eos):
    ends = list((input_ids == eos).nonzero()[0])
    if input_ids[-1] != eos:
        ends.append(input_ids.shape[0] - 1)
    bounds = np.array([-1] + ends, dtype=np.int64)
    return [int(x) for x in bounds[1:] - bounds[:-1]]


def build(paths, seq_len, eos, pad, long_doc_strategy="truncate", group_size=1, perm_seed=None, sort_kind="stable"):
    """The packed dataset: {"order": file permutation, "groups": [[paths]], "instances": [
    {group, ids, n_pad, doc_lengths, bin_lengths}], "tokens": packed tokens}."""
    order = permutation(len(paths), perm_seed)
    paths = [paths[i] for i in order]
    groups = chunked(paths, group_size)
    out = {"order": order, "groups": groups, "instances": [], "tokens": 0}
    for g, source_paths in enumerate(groups):
        arrays = [np.fromfile(p, dtype="<u4") for p in source_paths]
        sizes = [a.shape[0] for a in arrays]
        instances, document_indices, total_tokens = pack_documents_into_instances(
            arrays, seq_len, eos, long_doc_strategy, sort_kind)
        out["tokens"] += total_tokens
        for instance in instances:
            parts = []
            for document_id in instance:
                start, end = (int(x) for x in document_indices[document_id])
                source_start = 0
                for arr, size in zip(arrays, sizes):   # __getitem__'s lookup of the source file
                    if source_start <= start < source_start + size:
                        parts.append(arr[start - source_start:end - source_start])
                        break
                    source_start += size
                else:
                    raise RuntimeError("we shouldn't be here!")
            ids = np.concatenate(parts).astype(np.int64)
            n_pad = seq_len - ids.shape[0]
            ids = np.pad(ids, (0, n_pad), constant_values=pad)
            out["instances"].append({"group": g, "ids": ids, "n_pad": n_pad,
                                     "doc_lengths": get_document_lengths(ids, eos),
                                     "bin_lengths": [int(p.shape[0]) for p in parts]})
    return out


def sha256_u32(ids):
    return hashlib.sha256(np.asarray(ids, dtype="<u4").tobytes()).hexdigest()


def global_order(n, seed, epoch):
    a = np.arange(n, dtype=np.uint32)
    np.random.Generator(np.random.PCG64(seed + epoch)).shuffle(a)
    return a


def describe(ds, seed, epoch, shuffle=True):
    """What `olmo data order --describe N --json` prints, for every instance."""
    n = len(ds["instances"])
    perm = global_order(n, seed, epoch) if shuffle else np.arange(n, dtype=np.uint32)
    return [{"index": int(i), "group": ds["instances"][i]["group"], "sha256": sha256_u32(ds["instances"][i]["ids"]),
             "n_pad": ds["instances"][i]["n_pad"], "doc_lengths": ds["instances"][i]["doc_lengths"]} for i in perm]
