//===- EpilogueMemory.cpp - the epilogue's loads and stores ---------------===//
//
// How the epilogue reads its inputs and C and writes its outputs, in their
// layouts. Tensors that span n are read and written a column group at a
// time: the 8 slots of a row in one 32-column group, which the 4 lanes of a
// quad hold as 4 pairs each (columns 32g + 8j' + 2(l % 4) + {0, 1}). Each
// pair of adjacent columns is read with one access (4 or 8 bytes) when inside
// the tensor and aligned, else element by element. For 16-bit outputs with
// epilogue_vector_bytes = 16, the quad regroups its pairs by shuffles (a
// 4 x 4 transpose of 32-bit words) so that lane t writes the 16 contiguous
// bytes of columns 32g + 8t .. 32g + 8t + 7 when the whole group is inside
// the output and aligned. In the checked tiles, whose rows may not start on
// 16-byte boundaries (an odd N: GPT-2's vocabulary), each lane of a 16-bit
// [m, n] output instead writes the aligned 16 bytes that end in its chunk,
// made of the chunk before's last columns (from the lane before, or the group
// before) and its own first ones, by selects on the row's misalignment and a
// funnel shift; only the tile's and the output's edges are written element by
// element. Otherwise, and for f32, pair by pair.
// With the
// plan's chunked_loads, 16-bit [m, n] inputs are read the same way in
// reverse. An output of the even columns ([m, n/2]) takes one value of each
// pair: lane t holds elements 16g + 4j' + t of its half row, which the same
// transpose turns into the 4 contiguous elements 16g + 4t .. 16g + 4t + 3.
//
//===----------------------------------------------------------------------===//

#include "EpilogueLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mlir::coda;

Value EpilogueBuilder::loadSlot(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  Type f32 = b.getF32Type();
  auto load = [&]() -> Value {
    Value element = LLVM::LoadOp::create(
        b, elementType, slotAddress(pointer, elementType, h, c));
    if (elementType == f32)
      return element;
    return arith::ExtFOp::create(b, f32, element);
  };
  Value inside = inBounds(mask, h, c);
  if (!inside)
    return load();
  return b.ifThenElse(inside, f32, load, [&] { return b.f32(0.0); });
}

Value EpilogueBuilder::isAligned(Value pointer, int64_t bytes) {
  return aligned.lookup({pointer, bytes});
}

Value EpilogueBuilder::pairFits(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  if (interior)
    return Value();
  Value fits = b.andi(
      b.andi(nIsEven,
             isAligned(pointer, 2 * elementType.getIntOrFloatBitWidth() / 8)),
      b.ult(b.add(cols[c], b.i32(1)), values.n));
  if (mask & DimsAttr::kM)
    fits = b.andi(fits, b.ult(rows[h], values.m));
  return fits;
}

Value EpilogueBuilder::groupFits(Value pointer, unsigned mask, int64_t h,
                                 int64_t group) {
  if (interior)
    return Value();
  Value lastColumn = b.add(values.colBase, b.i32(32 * group + 31));
  Value fits = b.andi(b.andi(nIsMultipleOf8, isAligned(pointer, 16)),
                      b.ult(lastColumn, values.n));
  if (mask & DimsAttr::kM)
    fits = b.andi(fits, b.ult(rows[h], values.m));
  return fits;
}

Value EpilogueBuilder::packPair(Value first, Value second, Type elementType) {
  Type f32 = b.getF32Type();
  Value vector = LLVM::UndefOp::create(b, VectorType::get({2}, f32));
  vector = LLVM::InsertElementOp::create(b, vector, first, b.i32(0));
  vector = LLVM::InsertElementOp::create(b, vector, second, b.i32(1));
  if (elementType.isF32())
    return vector;
  vector =
      arith::TruncFOp::create(b, VectorType::get({2}, elementType), vector);
  return LLVM::BitcastOp::create(b, b.getI32Type(), vector);
}

std::pair<Value, Value> EpilogueBuilder::unpackPair(Value raw,
                                                    Type elementType) {
  Type f32 = b.getF32Type();
  if (elementType.isBF16()) {
    // A bf16 is the high half of the f32 of the same value: one instruction
    // per element (the extension of a vector moves the high half down first).
    Value low = b.shl(raw, b.i32(16));
    Value high = b.andi(raw, b.i32(0xFFFF0000));
    return {LLVM::BitcastOp::create(b, f32, low),
            LLVM::BitcastOp::create(b, f32, high)};
  }
  Value vector = raw;
  if (!elementType.isF32()) {
    vector = LLVM::BitcastOp::create(b, VectorType::get({2}, elementType), raw);
    vector = arith::ExtFOp::create(b, VectorType::get({2}, f32), vector);
  }
  return {LLVM::ExtractElementOp::create(b, vector, b.i32(0)),
          LLVM::ExtractElementOp::create(b, vector, b.i32(1))};
}

SmallVector<Value> EpilogueBuilder::transposeQuad(ArrayRef<Value> words) {
  // Two exchanges of half the words: with lane t ^ 2 the words j whose bit 1
  // differs from t's (a transpose of 2 x 2 blocks), then with lane t ^ 1 the
  // words whose bit 0 differs from t's (a transpose within the blocks).
  SmallVector<Value> w(words.begin(), words.end());
  for (int64_t bit : {1, 0}) {
    int64_t stride = int64_t{1} << bit;
    Value high =
        b.eq(b.andi(b.shru(values.lane, b.i32(bit)), b.i32(1)), b.i32(1));
    auto select = [&](Value cond, Value x, Value y) -> Value {
      return arith::SelectOp::create(b, cond, x, y);
    };
    SmallVector<Value> next(4);
    // Words j and j + stride (bit `bit` of j clear) trade places with the
    // partner: a lane with the bit clear sends j + stride and keeps j.
    for (int64_t j = 0; j < 4; ++j) {
      if (j & stride)
        continue;
      Value sent = select(high, w[j], w[j + stride]);
      Value received =
          gpu::ShuffleOp::create(b, sent, static_cast<int32_t>(stride), 32,
                                 gpu::ShuffleMode::XOR)
              .getShuffleResult();
      next[j] = select(high, received, w[j]);
      next[j + stride] = select(high, w[j + stride], received);
    }
    w = std::move(next);
  }
  return w;
}

Value EpilogueBuilder::loadPair(Value pointer, Type elementType, unsigned mask,
                                int64_t h, int64_t c) {
  Type rawType = elementType.isF32()
                     ? Type(VectorType::get({2}, b.getF32Type()))
                     : Type(b.getI32Type());
  auto load = [&]() -> Value {
    return LLVM::LoadOp::create(b, rawType,
                                slotAddress(pointer, elementType, h, c));
  };
  Value fits = pairFits(pointer, elementType, mask, h, c);
  if (!fits)
    return load();
  return b.ifThenElse(fits, rawType, load, [&] {
    return packPair(loadSlot(pointer, elementType, mask, h, c),
                    loadSlot(pointer, elementType, mask, h, c + 1),
                    elementType);
  });
}

void EpilogueBuilder::issueGroup(Value pointer, Type elementType, unsigned mask,
                                 int64_t h, int64_t group) {
  auto [it, inserted] =
      loadedGroups.try_emplace(std::make_tuple(pointer, h, group));
  if (!inserted)
    return;
  LoadedGroup &loaded = it->second;
  if (!plan.getChunkedLoads() || !usesChunks(elementType) ||
      !(mask & DimsAttr::kM)) {
    for (int64_t j = 0; j < 4; ++j)
      loaded.pairs.push_back(
          loadPair(pointer, elementType, mask, h, 8 * group + 2 * j));
    return;
  }
  // One 16-byte access per lane instead of four 4-byte ones: each warp
  // instruction then reads 64 contiguous bytes of each of its 8 rows.
  auto chunkType = VectorType::get({4}, b.getI32Type());
  auto load = [&]() -> Value {
    return LLVM::LoadOp::create(b, chunkType,
                                chunkAddress(pointer, elementType, h, group));
  };
  auto zero = [&]() -> Value { return LLVM::ZeroOp::create(b, chunkType); };
  loaded.fits = groupFits(pointer, mask, h, group);
  loaded.chunk =
      loaded.fits ? b.ifThenElse(loaded.fits, chunkType, load, zero) : load();
}

SmallVector<Value, 4> EpilogueBuilder::loadGroup(Value pointer,
                                                 Type elementType,
                                                 unsigned mask, int64_t h,
                                                 int64_t group) {
  issueGroup(pointer, elementType, mask, h, group);
  LoadedGroup &loaded =
      loadedGroups.find(std::make_tuple(pointer, h, group))->second;
  if (!loaded.pairs.empty())
    return loaded.pairs;
  // Regrouped here, at the first use, so that the shuffles wait for the
  // chunk only when its values are needed: lane t's word j holds the pair
  // that lane j uses at j' = t (the store's transpose, inverted).
  SmallVector<Value> words;
  for (int64_t j = 0; j < 4; ++j)
    words.push_back(LLVM::ExtractElementOp::create(b, loaded.chunk, b.i32(j)));
  SmallVector<Value> pairs = transposeQuad(words);
  for (int64_t j = 0; j < 4; ++j) {
    if (loaded.fits)
      pairs[j] = b.ifThenElse(
          loaded.fits, b.getI32Type(), [&] { return pairs[j]; },
          [&] {
            return loadPair(pointer, elementType, mask, h, 8 * group + 2 * j);
          });
    loaded.pairs.push_back(pairs[j]);
  }
  return loaded.pairs;
}

Value EpilogueBuilder::loadInput(Value pointer, Type elementType, unsigned mask,
                                 int64_t h, int64_t c) {
  if (!(mask & DimsAttr::kN))
    return loadSlot(pointer, elementType, mask, h, c);
  Value raw = loadGroup(pointer, elementType, mask, h, c / 8)[(c % 8) / 2];
  auto [first, second] = unpackPair(raw, elementType);
  return c % 2 ? second : first;
}

Value EpilogueBuilder::loadPeriodic(BlockArgument arg, Type elementType,
                                    unsigned mask, unsigned period, int64_t h,
                                    int64_t c) {
  // Where every tile starts at a multiple of the period, the slots of a
  // thread whose columns are whole periods apart read one element: the
  // first of them loads it, the others share its value (and what is
  // computed from it alone). Only in an interior tile: a checked tile walks
  // its groups in order, and the shared values, held across it, spilled.
  // A period of 32 columns would hold them across the whole tile; shorter
  // ones share within their group of 32 columns.
  if (interior && !halfN && period >= 8 && plan.getTileN() % period == 0 &&
      period != 32) {
    int64_t span = std::min<int64_t>(period, 32) / 4; // slots of a period
    int64_t first = period >= 64
                        ? c % (period / 4)
                        : 8 * (c / 8) + 2 * ((c % 8 / 2) % (span / 2)) + c % 2;
    if (first != c)
      return at(arg, h, first);
  }
  // Rows past M (in a tile at the bottom edge) read row M - 1: their
  // values are never written.
  Value row = rows[h];
  if ((mask & DimsAttr::kM) && !interior)
    row = arith::MinUIOp::create(b, row, b.sub(values.m, b.i32(1)));
  Value pointer = values.inputs[arg.getArgNumber() - 1];
  Value element =
      LLVM::LoadOp::create(b, elementType,
                           b.gep(pointer, elementType,
                                 getLinearIndex(b, values, mask, values.batch,
                                                row, cols[c], period)));
  if (elementType.isF32())
    return element;
  return arith::ExtFOp::create(b, b.getF32Type(), element);
}

void EpilogueBuilder::prefetchGroup(int64_t group, int64_t h) {
  for (const EpilogueTensor &tensor :
       getTensors(op, plan.getBiasInput(), values, dims)) {
    unsigned mask = tensor.mask;
    if (!tensor.isOutput && (mask & DimsAttr::kN) &&
        ((mask & DimsAttr::kM) || h == 0))
      issueGroup(tensor.pointer, tensor.elementType, mask, h, group);
  }
}

void EpilogueBuilder::storePair(Value first, Value second, Value pointer,
                                Type elementType, unsigned mask, int64_t h,
                                int64_t c) {
  storeWide(
      mask, pairFits(pointer, elementType, mask, h, c),
      [&] {
        LLVM::StoreOp::create(b, packPair(first, second, elementType),
                              slotAddress(pointer, elementType, h, c));
      },
      [&] {
        storeSlot(first, pointer, elementType, mask, h, c);
        storeSlot(second, pointer, elementType, mask, h, c + 1);
      });
}

void EpilogueBuilder::storeWide(unsigned mask, Value fits,
                                function_ref<void()> wide,
                                function_ref<void()> narrow) {
  // An output that does not span m is written by the lanes that hold row 0
  // (see storeSlot, which checks that itself).
  Value owner = (mask & DimsAttr::kM) ? Value() : b.eq(rows[0], b.i32(0));
  if (!fits)
    return owner ? b.ifThen(owner, wide) : wide();
  if (owner)
    fits = b.andi(fits, owner);
  auto ifOp = scf::IfOp::create(b, fits, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  wide();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  narrow();
}

void EpilogueBuilder::storeGroup(ArrayRef<Value> slots, Value pointer,
                                 Type elementType, unsigned mask, int64_t h,
                                 int64_t group) {
  auto storePairs = [&] {
    for (int64_t j = 0; j < 4; ++j)
      storePair(slots[2 * j], slots[2 * j + 1], pointer, elementType, mask, h,
                8 * group + 2 * j);
  };
  if (!usesChunks(elementType))
    return storePairs();
  SmallVector<Value> words;
  for (int64_t j = 0; j < 4; ++j)
    words.push_back(packPair(slots[2 * j], slots[2 * j + 1], elementType));
  SmallVector<Value> transposed = transposeQuad(words);
  auto storeChunk = [&] {
    auto chunkType = VectorType::get({4}, b.getI32Type());
    Value chunk = LLVM::UndefOp::create(b, chunkType);
    for (int64_t j = 0; j < 4; ++j)
      chunk = LLVM::InsertElementOp::create(b, chunk, transposed[j], b.i32(j));
    LLVM::StoreOp::create(b, chunk,
                          chunkAddress(pointer, elementType, h, group));
  };
  Value fits = groupFits(pointer, mask, h, group);
  if (!fits || !(mask & DimsAttr::kM))
    return storeWide(mask, fits, storeChunk, storePairs);
  // Checked tiles: the aligned 16 bytes that end in each chunk, which are the
  // chunk itself in rows that start on 16-byte boundaries.
  SmallVector<Value, 4> &stored = storedChunks[{pointer, h}];
  SmallVector<Value, 4> previous = stored;
  stored.assign(transposed.begin(), transposed.end());
  storeShiftedChunk(transposed, previous, pointer, h, group);
}

void EpilogueBuilder::storeShiftedChunk(ArrayRef<Value> words,
                                        ArrayRef<Value> previous, Value pointer,
                                        int64_t h, int64_t group) {
  Type i16 = b.getI16Type(), i32 = b.getI32Type();
  Value t = b.remu(values.lane, b.i32(4));
  Value chunk = chunkAddress(pointer, i16, h, group);
  // s: how many elements past a 16-byte boundary the chunk starts (the same
  // for every chunk of the row).
  Value s = b.andi(
      arith::TruncIOp::create(
          b, i32,
          b.shru(LLVM::PtrToIntOp::create(b, b.getI64Type(), chunk), b.i64(1))),
      b.i32(7));
  // The previous chunk: lane t - 1's, and for lane 0 lane 3's of the group
  // before (which lane 3 sends in place of its own).
  Value quadLast = b.eq(t, b.i32(3));
  Value source = b.add(b.andi(values.lane, b.i32(~3)),
                       b.remu(b.add(t, b.i32(3)), b.i32(4)));
  SmallVector<Value> combined;
  for (int64_t j = 0; j < 4; ++j) {
    Value sent =
        previous.empty()
            ? words[j]
            : arith::SelectOp::create(b, quadLast, previous[j], words[j]);
    combined.push_back(gpu::ShuffleOp::create(b, sent, source, b.i32(32),
                                              gpu::ShuffleMode::IDX)
                           .getShuffleResult());
  }
  combined.append(words.begin(), words.end());
  // The aligned 16 bytes start at element 8 - s of the 16 (previous ++ own):
  // word j is the funnel shift by 16 (s odd) or 0 bits of words
  // 4 - ceil(s / 2) + j and the one after, chosen by the bits of ceil(s / 2).
  Value up = b.shru(b.add(s, b.i32(1)), b.i32(1));
  auto choose = [&](int64_t i) {
    SmallVector<Value> candidates; // by ceil(s / 2), 0 to 4 (then padded)
    for (int64_t u = 0; u < 8; ++u)
      candidates.push_back(
          combined[std::min<int64_t>(4 - std::min<int64_t>(u, 4) + i, 7)]);
    for (int64_t bit = 0; candidates.size() > 1; ++bit) {
      Value set = b.eq(b.andi(up, b.i32(1 << bit)), b.i32(1 << bit));
      SmallVector<Value> next;
      for (size_t k = 0; k < candidates.size(); k += 2)
        next.push_back(
            arith::SelectOp::create(b, set, candidates[k + 1], candidates[k]));
      candidates = std::move(next);
    }
    return candidates.front();
  };
  Value halfShift = b.mul(b.andi(s, b.i32(1)), b.i32(16));
  SmallVector<Value> chosen;
  for (int64_t i = 0; i < 5; ++i)
    chosen.push_back(choose(i));
  SmallVector<Value> block;
  for (int64_t j = 0; j < 4; ++j)
    block.push_back(
        LLVM::FshrOp::create(b, chosen[j + 1], chosen[j], halfShift));

  // The chunk's first column c0; the 16 bytes hold columns c0 - s .. c0 + 7
  // - s, written whole when they are the tile's and inside the output.
  Value c0 =
      b.add(values.colBase, b.add(b.i32(32 * group), b.mul(t, b.i32(8))));
  Value start = b.sub(c0, s);
  Value rowInside = b.ult(rows[h], values.m);
  Value fits = b.andi(b.andi(rowInside, b.cmp(arith::CmpIPredicate::sge, start,
                                              values.colBase)),
                      b.ult(b.add(start, b.i32(7)), values.n));
  Value aligned = b.byteGep(chunk, b.sub(b.i32(0), b.mul(s, b.i32(2))));
  auto half = [&](ArrayRef<Value> from, int64_t i) -> Value {
    Value word = from[i / 2];
    if (i % 2)
      word = b.shru(word, b.i32(16));
    return arith::TruncIOp::create(b, i16, word);
  };
  auto ifOp = scf::IfOp::create(b, fits, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    auto chunkType = VectorType::get({4}, i32);
    Value vector = LLVM::UndefOp::create(b, chunkType);
    for (int64_t j = 0; j < 4; ++j)
      vector = LLVM::InsertElementOp::create(b, vector, block[j], b.i32(j));
    LLVM::StoreOp::create(b, vector, aligned);
    b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
    for (int64_t i = 0; i < 8; ++i) {
      Value col = b.add(start, b.i32(i));
      Value inside = b.andi(b.andi(rowInside, b.cmp(arith::CmpIPredicate::sge,
                                                    col, values.colBase)),
                            b.ult(col, values.n));
      b.ifThen(inside, [&] {
        LLVM::StoreOp::create(b, half(block, i), b.gep(aligned, i16, b.i64(i)));
      });
    }
  }
  // The tile's last s columns end the last chunk of lane 3; the next tile's
  // first block would take them, so lane 3 writes them here.
  if (group + 1 < numColSlots() / 8)
    return;
  Value tail = b.andi(b.andi(quadLast, rowInside), b.ult(b.i32(0), s));
  b.ifThen(tail, [&] {
    for (int64_t i = 1; i < 8; ++i) {
      Value inside =
          b.andi(b.cmp(arith::CmpIPredicate::uge, b.i32(i), b.sub(b.i32(8), s)),
                 b.ult(b.add(c0, b.i32(i)), values.n));
      b.ifThen(inside, [&] {
        LLVM::StoreOp::create(b, half(words, i), b.gep(chunk, i16, b.i64(i)));
      });
    }
  });
}

void EpilogueBuilder::storeEvenColumns(ArrayRef<Value> evens, Value pointer,
                                       Type elementType, unsigned mask,
                                       int64_t h, int64_t group) {
  // Element k of the half row holds column 2k; the row slot's address is
  // that of the thread's first even column, element colBase / 2 + t.
  Value row = addresses.find(pointer)->second.rows[h];
  auto storeEach = [&] {
    for (int64_t j = 0; j < 4; ++j) {
      int64_t c = 8 * group + 2 * j;
      auto store = [&] {
        Value element = evens[j];
        if (elementType != element.getType())
          element = arith::TruncFOp::create(b, elementType, element);
        LLVM::StoreOp::create(
            b, element, b.gep(row, elementType, b.i64(16 * group + 4 * j)));
      };
      if (Value inside = inBounds(mask, h, c))
        b.ifThen(inside, store);
      else
        store();
    }
  };
  Type i32 = b.getI32Type();
  SmallVector<Value> words;
  for (Value value : evens)
    words.push_back(LLVM::BitcastOp::create(b, i32, value));
  SmallVector<Value> transposed = transposeQuad(words);
  auto storeQuad = [&] {
    // Lane t's 4 elements start 3t elements after its first even column.
    Value shift = b.wide(b.mul(b.remu(values.lane, b.i32(4)), b.i32(3)));
    Value address =
        b.gep(b.gep(row, elementType, shift), elementType, b.i64(16 * group));
    Type f32 = b.getF32Type();
    auto element = [&](int64_t j) {
      return LLVM::BitcastOp::create(b, f32, transposed[j]);
    };
    Value quad;
    if (elementType.isF32()) {
      quad = LLVM::UndefOp::create(b, VectorType::get({4}, f32));
      for (int64_t j = 0; j < 4; ++j)
        quad = LLVM::InsertElementOp::create(b, quad, element(j), b.i32(j));
    } else {
      quad = LLVM::UndefOp::create(b, VectorType::get({2}, i32));
      for (int64_t j = 0; j < 2; ++j)
        quad = LLVM::InsertElementOp::create(
            b, quad, packPair(element(2 * j), element(2 * j + 1), elementType),
            b.i32(j));
    }
    LLVM::StoreOp::create(b, quad, address);
  };
  // Whole where the group is inside the output, N is a multiple of 8 (a
  // half row of 16-bit elements is then 8-byte aligned, of f32 16-byte) and
  // the tensor 16-byte aligned.
  storeWide(mask, groupFits(pointer, mask, h, group), storeQuad, storeEach);
}

void EpilogueBuilder::storeHalves(ArrayRef<Value> slots, Value pointer,
                                  Type elementType, unsigned mask, int64_t h,
                                  int64_t group) {
  // Slot 4j + 2e + f (j counted over the row slot's groups) is output column
  // 2p + f with pair p = colBase + 2(l % 4) + 8j + e: element p of half f
  // of the row, whose slot address is that of pair colBase + 2(l % 4).
  Value row = addresses.find(pointer)->second.rows[h];
  Value half = b.wide(b.shru(values.n, b.i32(1)));
  for (int64_t j = 0; j < 2; ++j) {
    for (int64_t f = 0; f < 2; ++f) {
      int64_t first = 8 * group + 4 * j + f, second = first + 2;
      Value address = b.gep(row, elementType, b.i64(8 * (2 * group + j)));
      if (f)
        address = b.gep(address, elementType, half);
      // Both pairs inside and the pair's access aligned: the tensor to two
      // elements, and for the second half N / 2 even (N a multiple of 4);
      // interior tiles have N a multiple of 8.
      Value fits;
      if (!interior) {
        fits = b.andi(
            isAligned(pointer, 2 * elementType.getIntOrFloatBitWidth() / 8),
            b.ult(cols[second], values.n));
        if (f)
          fits = b.andi(fits, b.eq(b.andi(values.n, b.i32(3)), b.i32(0)));
        if (mask & DimsAttr::kM)
          fits = b.andi(fits, b.ult(rows[h], values.m));
      }
      storeWide(
          mask, fits,
          [&] {
            LLVM::StoreOp::create(b,
                                  packPair(slots[first - 8 * group],
                                           slots[second - 8 * group],
                                           elementType),
                                  address);
          },
          [&] {
            for (auto [slot, offset] : {std::pair(first, 0), {second, 1}})
              storeElement(slots[slot - 8 * group],
                           b.gep(address, elementType, b.i64(offset)),
                           elementType, inBounds(mask, h, slot));
          });
    }
  }
}

void EpilogueBuilder::storeSlot(Value value, Value pointer, Type elementType,
                                unsigned mask, int64_t h, int64_t c) {
  Value cond = inBounds(mask, h, c);
  auto conjoin = [&](Value more) { cond = cond ? b.andi(cond, more) : more; };
  // An output that does not span m (n) is uniform along it: only the
  // threads that hold row 0 (column 0) of the output write it.
  if (!(mask & DimsAttr::kM))
    conjoin(b.eq(rows[0], b.i32(0)));
  if (!(mask & DimsAttr::kN))
    conjoin(b.eq(cols[0], b.i32(0)));
  storeElement(value, slotAddress(pointer, elementType, h, c), elementType,
               cond);
}

void EpilogueBuilder::storeElement(Value value, Value address, Type elementType,
                                   Value cond) {
  auto store = [&] {
    Value element = value;
    if (elementType != element.getType())
      element = arith::TruncFOp::create(b, elementType, element);
    LLVM::StoreOp::create(b, element, address);
  };
  if (cond)
    b.ifThen(cond, store);
  else
    store();
}
