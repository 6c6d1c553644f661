// NodeDef's attribute lookups: a few attributes are scanned, more are
// found in the map; both must find every attribute and nothing else.
#include <string>

#include "gtest/gtest.h"
#include "tdf/graph.h"

namespace tdf {
namespace {

TEST(NodeDefAttrTest, FindsEveryAttributeOnBothSidesOfTheScan) {
  // Names of equal length, and names that prefix each other: neither may
  // be taken for another.
  const std::string names[] = {"T", "U", "arg_index", "call_site", "function", "fun", "functions", "result_index"};
  for (int count = 0; count <= 8; ++count) {
    NodeDef n;
    n.name = "n";
    n.op = "Call";
    for (int i = 0; i < count; ++i) n.attr[names[i]] = int64_t{i};
    for (int i = 0; i < 8; ++i) {
      const AttrValue* v = n.FindAttr(names[i]);
      if (i < count) {
        ASSERT_NE(v, nullptr) << count << " " << names[i];
        EXPECT_EQ(*v->get_if<int64_t>(), i) << count << " " << names[i];
        EXPECT_EQ(*n.GetInt(names[i]), i);
      } else {
        EXPECT_EQ(v, nullptr) << count << " " << names[i];
        EXPECT_FALSE(n.GetInt(names[i]).ok());
      }
    }
    EXPECT_EQ(n.FindAttr(""), nullptr);
    EXPECT_EQ(n.FindAttr("functio"), nullptr);
    EXPECT_EQ(n.FindAttr("t"), nullptr);  // case matters
  }
}

}  // namespace
}  // namespace tdf
