"""The order a ``java.util.HashMap<String, ?>`` iterates its names, as OpenSearch's
``XContentParser.map()`` fills one from a JSON object: what ``String.valueOf`` of the map writes
(``javafmt.hash_map_string``).

Java's ``HashMap`` (JDK 8 and later, unchanged since): a table of buckets, 16 at the first name;
a name goes to the bucket of the low bits of its spread hash (``String.hashCode()``, over UTF-16
units in 32 bits, xor its high half) and to the end of that bucket. The table doubles when it
holds more than three quarters of its size, or when a bucket would hold more than 8 names while
there are fewer than 64 buckets; doubling splits each bucket by the next bit, keeping its order.
A bucket of more than 8 names in a larger table becomes a red-black tree (ordered by hash, then
by ``String.compareTo``) whose root Java moves to the bucket's front, and into which a new name
is linked after its tree parent: iteration follows that order, so it is reproduced here too,
rotation by rotation, as is a tree's split (back to a list at 6 names or fewer) on doubling.
"""

from __future__ import annotations

from collections.abc import Iterable

_FIRST_BUCKETS = 16
_LIST_LIMIT = 8  # a bucket of more names becomes a tree (or doubles a smaller table)
_TREE_TABLE = 64  # the smallest table whose buckets become trees
_LIST_AGAIN = 6  # a tree split to this many names or fewer is a list again


class _Node:
    __slots__ = ("hash", "left", "name", "parent", "red", "right", "units")

    def __init__(self, spread: int, name: str) -> None:
        self.hash = spread - (1 << 32) if spread >= 1 << 31 else spread  # Java compares ints
        self.name = name
        self.units = name.encode("utf-16-be", "surrogatepass")  # String.compareTo's order
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.parent: _Node | None = None
        self.red = False


class _Bucket:
    """The names of one bucket in Java's iteration order, and the root of its tree if it is
    one (then always the first name)."""

    __slots__ = ("nodes", "root")

    def __init__(self, nodes: list[_Node], root: _Node | None = None) -> None:
        self.nodes = nodes
        self.root = root


def hash_map_order(names: Iterable[str]) -> list[str]:
    """The order a ``HashMap`` iterates ``names``, put into it in this order (each once)."""
    buckets = [_Bucket([]) for _ in range(_FIRST_BUCKETS)]
    for size, name in enumerate(names, 1):
        node = _Node(_spread(name), name)
        bucket = buckets[node.hash & (len(buckets) - 1)]
        if bucket.root is not None:
            _put_in_tree(bucket, node)
        else:
            bucket.nodes.append(node)
            if len(bucket.nodes) > _LIST_LIMIT:
                if len(buckets) < _TREE_TABLE:
                    buckets = _doubled(buckets)
                else:
                    _treeify(bucket)
        if size > len(buckets) * 3 // 4:
            buckets = _doubled(buckets)
    return [node.name for bucket in buckets for node in bucket.nodes]


def _spread(name: str) -> int:
    """``HashMap.hash``: ``h ^ (h >>> 16)`` of ``String.hashCode()``, as 32 unsigned bits."""
    h = 0
    units = name.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _doubled(buckets: list[_Bucket]) -> list[_Bucket]:
    """``HashMap.resize``: bucket ``i`` splits into ``i`` and ``i + n`` by bit ``n`` of the
    hash, each part in the bucket's order; a tree's part is a list again at 6 names or fewer,
    a new tree when the other part has names, and the same tree when it has all of them."""
    bit = len(buckets)
    low: list[_Bucket] = []
    high: list[_Bucket] = []
    for bucket in buckets:
        parts = ([n for n in bucket.nodes if not n.hash & bit],
                 [n for n in bucket.nodes if n.hash & bit])
        for part, other, into in ((parts[0], parts[1], low), (parts[1], parts[0], high)):
            if bucket.root is None or len(part) <= _LIST_AGAIN:
                into.append(_Bucket(part))
            elif not other:
                into.append(bucket)
            else:
                split = _Bucket(part)
                _treeify(split)
                into.append(split)
    return low + high


def _goes_left(x: _Node, p: _Node) -> bool:
    """``dir <= 0`` of ``treeify`` and ``putTreeVal``: by hash, then ``String.compareTo``."""
    if p.hash != x.hash:
        return p.hash > x.hash
    return x.units < p.units


def _treeify(bucket: _Bucket) -> None:
    """``TreeNode.treeify``: each name inserted in the bucket's order, then the root moved to
    the front."""
    root: _Node | None = None
    for x in bucket.nodes:
        x.left = x.right = None
        if root is None:
            x.parent, x.red, root = None, False, x
            continue
        _attach(root, x)
        root = _balance_insertion(root, x)
    assert root is not None
    bucket.root = root
    _root_to_front(bucket)


def _put_in_tree(bucket: _Bucket, x: _Node) -> None:
    """``TreeNode.putTreeVal``: ``x`` is linked right after its tree parent."""
    assert bucket.root is not None
    parent = _attach(bucket.root, x)
    bucket.nodes.insert(bucket.nodes.index(parent) + 1, x)
    bucket.root = _balance_insertion(bucket.root, x)
    _root_to_front(bucket)


def _attach(root: _Node, x: _Node) -> _Node:
    """Walk down from ``root`` to where ``x`` belongs and hang it there; its parent."""
    p = root
    while True:
        left = _goes_left(x, p)
        child = p.left if left else p.right
        if child is None:
            x.parent = p
            if left:
                p.left = x
            else:
                p.right = x
            return p
        p = child


def _root_to_front(bucket: _Bucket) -> None:
    """``moveRootToFront``."""
    root = bucket.root
    if root is not None and bucket.nodes[0] is not root:
        bucket.nodes.remove(root)
        bucket.nodes.insert(0, root)


def _balance_insertion(root: _Node, x: _Node) -> _Node:
    """``TreeNode.balanceInsertion``, step for step; the new root."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        xppl = xpp.left
        if xp is xppl:
            xppr = xpp.right
            if xppr is not None and xppr.red:
                xppr.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.right:
                x = xp
                root = _rotate_left(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = _rotate_right(root, xpp)
        else:
            if xppl is not None and xppl.red:
                xppl.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.left:
                x = xp
                root = _rotate_right(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = _rotate_left(root, xpp)


def _rotate_left(root: _Node, p: _Node) -> _Node:
    r = p.right
    if r is not None:
        rl = p.right = r.left
        if rl is not None:
            rl.parent = p
        pp = r.parent = p.parent
        if pp is None:
            root = r
            r.red = False
        elif pp.left is p:
            pp.left = r
        else:
            pp.right = r
        r.left = p
        p.parent = r
    return root


def _rotate_right(root: _Node, p: _Node) -> _Node:
    left = p.left
    if left is not None:
        lr = p.left = left.right
        if lr is not None:
            lr.parent = p
        pp = left.parent = p.parent
        if pp is None:
            root = left
            left.red = False
        elif pp.right is p:
            pp.right = left
        else:
            pp.left = left
        left.right = p
        p.parent = left
    return root
