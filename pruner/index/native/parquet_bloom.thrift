// The header Parquet writes before each bloom filter's bitset (the Parquet format's
// BloomFilterHeader), for thriftpy2 to decode with the compact protocol. Only the one
// algorithm, hash and compression the format defines exist; pruner refuses any other.

struct SplitBlockAlgorithm {}
union BloomFilterAlgorithm {
  1: SplitBlockAlgorithm BLOCK;
}

struct XxHash {}
union BloomFilterHash {
  1: XxHash XXHASH;
}

struct Uncompressed {}
union BloomFilterCompression {
  1: Uncompressed UNCOMPRESSED;
}

struct BloomFilterHeader {
  1: required i32 numBytes;
  2: required BloomFilterAlgorithm algorithm;
  3: required BloomFilterHash hash;
  4: required BloomFilterCompression compression;
}
