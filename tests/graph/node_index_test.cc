#include "graph/node_index.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tdf/graph.h"

namespace tdf {
namespace {

NodeDef N(const std::string& name, const std::string& op, std::vector<std::string> inputs = {}) {
  NodeDef n;
  n.name = name;
  n.op = op;
  n.input = std::move(inputs);
  return n;
}

void ExpectInput(const ResolvedInput& in, int32_t src, int32_t port, bool is_control) {
  EXPECT_EQ(in.src, src);
  EXPECT_EQ(in.port, port);
  EXPECT_EQ(in.is_control, is_control);
}

void ExpectInvalid(const absl::Status& s, const std::string& message) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), message);
}

TEST(ParseInputViewTest, PlainName) {
  absl::StatusOr<InputView> v = ParseInputView("a");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->node, "a");
  EXPECT_EQ(v->port, 0);
  EXPECT_FALSE(v->is_control);
}

TEST(ParseInputViewTest, Port) {
  absl::StatusOr<InputView> v = ParseInputView("a:3");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->node, "a");
  EXPECT_EQ(v->port, 3);
  EXPECT_FALSE(v->is_control);
}

TEST(ParseInputViewTest, Control) {
  absl::StatusOr<InputView> v = ParseInputView("^a");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->node, "a");
  EXPECT_EQ(v->port, 0);
  EXPECT_TRUE(v->is_control);
}

TEST(ParseInputViewTest, NameWithSlash) {
  absl::StatusOr<InputView> v = ParseInputView("f/x:1");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->node, "f/x");
  EXPECT_EQ(v->port, 1);
  EXPECT_FALSE(v->is_control);
}

TEST(ParseInputViewTest, Errors) {
  ExpectInvalid(ParseInputView("a:x").status(), "malformed input 'a:x': bad port");
  ExpectInvalid(ParseInputView("a:-1").status(), "malformed input 'a:-1': bad port");
  ExpectInvalid(ParseInputView(":0").status(), "malformed input ':0': empty node name");
  ExpectInvalid(ParseInputView("^").status(), "malformed input '^': empty node name");
}

// Ports of plain digits are read inline, anything else by SimpleAtoi: the
// two readings agree at their border.
TEST(ParseInputViewTest, PortForms) {
  struct Case {
    const char* text;
    const char* node;
    int port;
  };
  for (const Case& c : {Case{"a:0", "a", 0}, Case{"a:007", "a", 7}, Case{"a:123456789", "a", 123456789},
                        Case{"a:1234567890", "a", 1234567890}, Case{"a:1:2", "a:1", 2}, Case{"f/g:10", "f/g", 10}}) {
    absl::StatusOr<InputView> v = ParseInputView(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status();
    EXPECT_EQ(v->node, c.node) << c.text;
    EXPECT_EQ(v->port, c.port) << c.text;
  }
  ExpectInvalid(ParseInputView("a:").status(), "malformed input 'a:': bad port");
  ExpectInvalid(ParseInputView("a:2147483648").status(), "malformed input 'a:2147483648': bad port");
  ExpectInvalid(ParseInputView("a:1x").status(), "malformed input 'a:1x': bad port");
  // A control input has no port: its name keeps the colon (and names no node).
  absl::StatusOr<InputView> control = ParseInputView("^a:1");
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_EQ(control->node, "a:1");
  EXPECT_TRUE(control->is_control);
}

// The point of InputView is to avoid copying: the name must alias the input.
TEST(ParseInputViewTest, ViewPointsIntoArgument) {
  const std::string text = "^some/long_node_name_beyond_sso";
  absl::StatusOr<InputView> v = ParseInputView(text);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->node, "some/long_node_name_beyond_sso");
  EXPECT_GE(v->node.data(), text.data());
  EXPECT_LE(v->node.data() + v->node.size(), text.data() + text.size());
  EXPECT_EQ(v->node.data(), text.data() + 1);

  const std::string data = "x:2";
  absl::StatusOr<InputView> w = ParseInputView(data);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->node.data(), data.data());
  EXPECT_EQ(w->node.size(), 1u);
}

// InputRef::Parse delegates to ParseInputView; its results must not change.
TEST(InputViewInputRefParseTest, SameResults) {
  absl::StatusOr<InputRef> r = InputRef::Parse("a");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node, "a");
  EXPECT_EQ(r->port, 0);
  EXPECT_FALSE(r->is_control);

  r = InputRef::Parse("a:3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node, "a");
  EXPECT_EQ(r->port, 3);
  EXPECT_FALSE(r->is_control);

  r = InputRef::Parse("^b");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node, "b");
  EXPECT_EQ(r->port, 0);
  EXPECT_TRUE(r->is_control);

  r = InputRef::Parse("f/x:1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node, "f/x");
  EXPECT_EQ(r->port, 1);
  EXPECT_FALSE(r->is_control);
}

TEST(InputViewInputRefParseTest, SameErrors) {
  ExpectInvalid(InputRef::Parse("a:x").status(), "malformed input 'a:x': bad port");
  ExpectInvalid(InputRef::Parse("a:-1").status(), "malformed input 'a:-1': bad port");
  ExpectInvalid(InputRef::Parse(":0").status(), "malformed input ':0': empty node name");
  ExpectInvalid(InputRef::Parse("^").status(), "malformed input '^': empty node name");
}

TEST(NodeIndexTest, BuildResolvesInputs) {
  // "d" reads "e", which comes later in the list: forward references resolve.
  const std::vector<NodeDef> nodes = {
      N("a", "Const"),
      N("b", "Const"),
      N("c", "Add", {"a", "b:2", "^a"}),
      N("d", "Identity", {"e:1"}),
      N("e", "Split", {"c", "^b"}),
  };
  absl::StatusOr<NodeIndex> index = NodeIndex::Build(nodes);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), 5u);

  EXPECT_EQ(index->Find("a"), 0);
  EXPECT_EQ(index->Find("b"), 1);
  EXPECT_EQ(index->Find("c"), 2);
  EXPECT_EQ(index->Find("d"), 3);
  EXPECT_EQ(index->Find("e"), 4);
  EXPECT_EQ(index->Find("nope"), -1);
  EXPECT_EQ(index->Find(""), -1);
  EXPECT_EQ(index->Find("a:0"), -1);  // Find takes names, not input strings

  EXPECT_TRUE(index->inputs(0).empty());
  EXPECT_TRUE(index->inputs(1).empty());

  absl::Span<const ResolvedInput> c = index->inputs(2);
  ASSERT_EQ(c.size(), 3u);
  ExpectInput(c[0], 0, 0, false);
  ExpectInput(c[1], 1, 2, false);
  ExpectInput(c[2], 0, 0, true);

  absl::Span<const ResolvedInput> d = index->inputs(3);
  ASSERT_EQ(d.size(), 1u);
  ExpectInput(d[0], 4, 1, false);

  absl::Span<const ResolvedInput> e = index->inputs(4);
  ASSERT_EQ(e.size(), 2u);
  ExpectInput(e[0], 2, 0, false);
  ExpectInput(e[1], 1, 0, true);
}

TEST(NodeIndexTest, DuplicateName) {
  const std::vector<NodeDef> nodes = {N("a", "Const"), N("b", "Identity", {"a"}), N("a", "Const")};
  ExpectInvalid(NodeIndex::Build(nodes).status(), "node 'a' (Const): duplicate node name");
}

TEST(NodeIndexTest, UnknownInput) {
  const std::vector<NodeDef> nodes = {N("a", "Const"), N("b", "Identity", {"nope"})};
  ExpectInvalid(NodeIndex::Build(nodes).status(), "node 'b' (Identity): input 'nope' names an unknown node");
}

TEST(NodeIndexTest, MalformedInput) {
  const std::vector<NodeDef> nodes = {N("a", "Const"), N("b", "Identity", {"a:x"})};
  ExpectInvalid(NodeIndex::Build(nodes).status(), "node 'b' (Identity): malformed input 'a:x': bad port");
}

// Short lists are searched without a table, long ones with one: both
// sides of the border find every node and report a duplicate.
TEST(NodeIndexTest, ShortAndLongLists) {
  for (int size : {1, 2, 16, 17, 40}) {
    std::vector<NodeDef> nodes;
    nodes.push_back(N("n0", "Const"));
    for (int i = 1; i < size; ++i)
      nodes.push_back(N("n" + std::to_string(i), "Identity", {"n" + std::to_string(i - 1)}));
    absl::StatusOr<NodeIndex> index = NodeIndex::Build(nodes);
    ASSERT_TRUE(index.ok()) << size << ": " << index.status();
    for (int i = 0; i < size; ++i) {
      EXPECT_EQ(index->Find("n" + std::to_string(i)), i) << size;
      if (i > 0) ExpectInput(index->inputs(i)[0], i - 1, 0, false);
    }
    EXPECT_EQ(index->Find("n"), -1) << size;
    EXPECT_EQ(index->Find("n" + std::to_string(size)), -1) << size;
    nodes.push_back(N("n0", "Const"));
    ExpectInvalid(NodeIndex::Build(nodes).status(), "node 'n0' (Const): duplicate node name");
  }
}

TEST(NodeIndexTest, EmptyList) {
  const std::vector<NodeDef> nodes;
  absl::StatusOr<NodeIndex> index = NodeIndex::Build(nodes);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->size(), 0u);
  EXPECT_EQ(index->Find("a"), -1);
  EXPECT_EQ(index->Find(""), -1);
}

TEST(NodeIndexTest, DefaultConstructedIsEmpty) {
  NodeIndex index;
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.Find("a"), -1);
}

// The map's keys view the NodeDefs' names, so moving the index keeps them valid.
TEST(NodeIndexTest, MovedIndexStillFinds) {
  const std::vector<NodeDef> nodes = {N("first_node_name_beyond_sso", "Const"),
                                      N("second_node_name_beyond_sso", "Identity", {"first_node_name_beyond_sso"})};
  absl::StatusOr<NodeIndex> built = NodeIndex::Build(nodes);
  ASSERT_TRUE(built.ok()) << built.status();
  NodeIndex moved = std::move(*built);
  NodeIndex moved_again;
  moved_again = std::move(moved);
  EXPECT_EQ(moved_again.size(), 2u);
  EXPECT_EQ(moved_again.Find("first_node_name_beyond_sso"), 0);
  EXPECT_EQ(moved_again.Find("second_node_name_beyond_sso"), 1);
  EXPECT_EQ(moved_again.Find("nope"), -1);
  ASSERT_EQ(moved_again.inputs(1).size(), 1u);
  ExpectInput(moved_again.inputs(1)[0], 0, 0, false);
}

}  // namespace
}  // namespace tdf
