// Abseil's hash tables and running out of memory (issue #26, item 4).
//
// The Debian Abseil (20220623) does not survive a failed allocation inside
// a table: raw_hash_set::resize sets the new capacity before it allocates,
// so a table whose growth threw std::bad_alloc is inconsistent; and an
// insertion marks its slot full before it constructs the element there, so
// an element whose construction throws (a std::string key copied) leaves a
// full slot of garbage. Destroying either table frees what was never
// allocated. What is safe: a table sized in its constructor (a constructor
// that throws destroys nothing), which does not grow while it holds no more
// than it was sized for, and moving in an element whose move cannot throw.
//
// base::FlatHashMap and base::FlatHashSet are Abseil's flat tables that
// keep to that: they grow by copying their elements into a larger table
// made by its constructor, and build each element before the insertion
// that takes it by move. They do not erase: Abseil cleans tombstones up by
// moving elements between slots, which copies a std::string key and may
// throw too. Code that may run out of memory (Session::Create, a run) uses
// them, or sizes its Abseil tables with BucketsFor and never grows them.
#ifndef TDF_SRC_BASE_HASH_TABLES_H_
#define TDF_SRC_BASE_HASH_TABLES_H_

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace tdf {
namespace base {

// A bucket count for an Abseil table's constructor that holds `n` entries
// without growing (a table grows past 7/8 of its capacity).
inline size_t BucketsFor(size_t n) { return n + n / 7 + 1; }

// `Table` (an absl::flat_hash_map or flat_hash_set) whose insertions leave
// it whole, and the element not inserted, when an allocation throws. Only
// the members below insert; Abseil's others (insert_or_assign, the hinted
// and node-handle forms, rehash) are hidden so that none bypasses them.
template <class Table>
class ExceptionSafeTable : public Table {
 public:
  using typename Table::const_iterator;
  using typename Table::init_type;
  using typename Table::iterator;
  using typename Table::key_type;
  using typename Table::value_type;

  ExceptionSafeTable() = default;
  explicit ExceptionSafeTable(size_t bucket_count) : Table(bucket_count) {}
  ExceptionSafeTable(std::initializer_list<init_type> values) { insert(values.begin(), values.end()); }
  ExceptionSafeTable(const ExceptionSafeTable& other) : Table(other.empty() ? 0 : BucketsFor(other.size())) {
    for (const value_type& v : other) Table::insert(init_type(v));
  }
  ExceptionSafeTable(ExceptionSafeTable&&) noexcept = default;
  ExceptionSafeTable& operator=(const ExceptionSafeTable& other) {
    if (this != &other) {
      ExceptionSafeTable copy(other);
      Table::swap(copy);
    }
    return *this;
  }
  ExceptionSafeTable& operator=(ExceptionSafeTable&&) noexcept = default;

  std::pair<iterator, bool> insert(const value_type& v) { return InsertBuilt(init_type(v)); }
  std::pair<iterator, bool> insert(init_type&& v) { return InsertBuilt(std::move(v)); }
  template <class T, class = std::enable_if_t<std::is_constructible_v<init_type, T&&> &&
                                              !std::is_same_v<std::decay_t<T>, init_type>>>
  std::pair<iterator, bool> insert(T&& v) {
    return InsertBuilt(init_type(std::forward<T>(v)));
  }
  template <class It>
  void insert(It first, It last) {
    if constexpr (std::is_base_of_v<std::forward_iterator_tag,
                                    typename std::iterator_traits<It>::iterator_category>) {
      MakeRoomFor(this->size() + static_cast<size_t>(std::distance(first, last)));
    }
    for (; first != last; ++first) insert(*first);
  }
  void insert(std::initializer_list<init_type> values) { insert(values.begin(), values.end()); }

  template <class... Args>
  std::pair<iterator, bool> emplace(Args&&... args) {
    return InsertBuilt(init_type(std::forward<Args>(args)...));
  }
  // Maps only (a set has no mapped type; not instantiated for one).
  template <class K, class... Args>
  std::pair<iterator, bool> try_emplace(K&& key, Args&&... args) {
    iterator it = this->find(key);
    if (it != this->end()) return {it, false};
    return InsertBuilt(init_type(std::piecewise_construct, std::forward_as_tuple(std::forward<K>(key)),
                                 std::forward_as_tuple(std::forward<Args>(args)...)));
  }
  template <class K>
  auto& operator[](K&& key) {
    return try_emplace(std::forward<K>(key)).first->second;
  }
  auto& operator[](const key_type& key) { return try_emplace(key).first->second; }
  auto& operator[](key_type&& key) { return try_emplace(std::move(key)).first->second; }

  void reserve(size_t n) { MakeRoomFor(n); }

  // Erasing leaves tombstones, which Abseil cleans up by moving elements
  // between slots (copying their keys): these tables do not erase.
  void erase() = delete;
  void insert_or_assign() = delete;
  void rehash() = delete;
  void emplace_hint() = delete;
  void merge() = delete;

 private:
  std::pair<iterator, bool> InsertBuilt(init_type&& v) {
    iterator it = this->find(KeyOf(v));
    if (it != this->end()) return {it, false};
    MakeRoomFor(this->size() + 1);
    return Table::insert(std::move(v));  // moves: nothing allocates
  }

  template <class T>
  static const auto& KeyOf(const T& v) {
    if constexpr (std::is_same_v<T, key_type>) {
      return v;
    } else {
      return v.first;
    }
  }

  // Makes room for `n` elements without Abseil's own growth: a table that
  // would grow (past 7/8 full) is copied into one made for twice the
  // elements.
  void MakeRoomFor(size_t n) {
    const size_t capacity = this->capacity();
    const size_t growth = capacity == 0 ? 0 : capacity - capacity / 8 - (capacity == 7 ? 1 : 0);
    if (n <= growth) return;
    // Copies: Abseil moves an element between slots by copying its const
    // key (a std::string allocates), so a move that throws could leave this
    // table half moved; a copy that throws leaves it as it was.
    Table bigger(BucketsFor(std::max(n, 2 * this->size())), this->hash_function(), this->key_eq());
    for (const value_type& v : *this) bigger.insert(init_type(v));
    Table::swap(bigger);
  }
};

template <class... Args>
using FlatHashMap = ExceptionSafeTable<absl::flat_hash_map<Args...>>;
template <class... Args>
using FlatHashSet = ExceptionSafeTable<absl::flat_hash_set<Args...>>;

}  // namespace base
}  // namespace tdf

#endif  // TDF_SRC_BASE_HASH_TABLES_H_
