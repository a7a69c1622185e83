// tebench end to end over the soft provider: a target process and initiator
// processes (the real binary), a sweep and a QoS run with --check_consistency
// (every byte written is read back and compared), the JSONL checked, bad
// flags exit 2, and the target stops on SIGTERM.
//
// usage: tebench_roundtrip_test TEBENCH_BINARY [gtest flags]
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string g_tebench;

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "tebench_rt_" + std::to_string(getpid()) + "_" + name;
}

// Two soft devices, unlimited links; the default lcore layout.
std::string writeConfig() {
  const std::string path = tempPath("config.yaml");
  std::ofstream out(path);
  out << "fabric:\n  provider: soft\n  soft:\n    devices:\n"
         "      - {name: soft0, numa_node: 0}\n      - {name: soft1, numa_node: 0}\n"
         "log:\n  level: warn\n";
  return path;
}

struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // stdout+stderr when captured through a pipe
};

// Starts TEBENCH args...; stdout and stderr go to `log_path`, or to a pipe
// when `log_path` is empty.
Child spawn(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(g_tebench.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  Child child;
  int pipe_fds[2] = {-1, -1};
  if (log_path.empty()) {
    EXPECT_EQ(pipe(pipe_fds), 0);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  EXPECT_EQ(posix_spawn(&child.pid, g_tebench.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  if (log_path.empty()) {
    close(pipe_fds[1]);
    child.out_fd = pipe_fds[0];
  }
  return child;
}

// Waits for the child to exit within `limit`; kills it after. Returns the
// exit code, or -1 when it had to be killed or died on a signal.
int waitExit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::yield();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Reads the target's output until its ready line; returns the segment name.
std::string awaitReady(int fd, std::chrono::seconds limit, std::string* seen) {
  const auto deadline = Clock::now() + limit;
  const std::string key = "tebench target ready: segment=";
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;  // the target exited
    seen->append(buf, static_cast<size_t>(n));
    size_t at = seen->find(key);
    if (at != std::string::npos) {
      size_t end = seen->find_first_of(" \n", at + key.size());
      if (end != std::string::npos) return seen->substr(at + key.size(), end - at - key.size());
    }
  }
  return "";
}

class TebenchRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = writeConfig();
    target_ = spawn({"--backend=tent", "--xport_type=rdma", "--seg_type=DRAM",
                     "--config=" + config_, "--total_buffer_size=16M"},
                    "");
    segment_ = awaitReady(target_.out_fd, std::chrono::seconds(60), &target_output_);
    ASSERT_FALSE(segment_.empty()) << "target output:\n" << target_output_;
  }

  void TearDown() override {
    if (target_.pid > 0) {
      kill(target_.pid, SIGTERM);
      EXPECT_EQ(waitExit(target_.pid, std::chrono::seconds(30)), 0) << "target did not stop";
    }
    if (target_.out_fd >= 0) close(target_.out_fd);
  }

  int initiator(std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), {"--target_seg_name=" + segment_, "--config=" + config_,
                               "--total_buffer_size=16M"});
    Child c = spawn(args, log);
    return waitExit(c.pid, std::chrono::seconds(120));
  }

  std::string config_;
  Child target_;
  std::string segment_;
  std::string target_output_;
};

TEST_F(TebenchRoundTrip, SweepWithConsistencyCheck) {
  const std::string log = tempPath("sweep.log");
  int rc =
      initiator({"--check_consistency", "--duration=0.1", "--warmup=0.1", "--start_block_size=4096",
                 "--max_block_size=65536", "--max_batch_size=2", "--max_num_threads=2"},
                log);
  const std::string out = readFile(log);
  ASSERT_EQ(rc, 0) << out;
  // 2 thread counts x 5 block sizes (4K..64K) x 2 batch sizes.
  int rows = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0]))) ++rows;
  }
  EXPECT_EQ(rows, 20) << out;
  EXPECT_NE(out.find("# provider: soft"), std::string::npos) << out;
  EXPECT_EQ(out.find("mismatch"), std::string::npos) << out;
}

// --poll_mode=wait: the caller waits with waitTransfer per task; batches of 3 so a task
// after the first is waited on too; the consistency check verifies the bytes.
TEST_F(TebenchRoundTrip, WaitingCallerVerifiesItsBytes) {
  const std::string log = tempPath("wait.log");
  int rc = initiator({"--check_consistency", "--poll_mode=wait", "--duration=0.1", "--warmup=0.1",
                      "--start_block_size=65536", "--max_block_size=65536", "--start_batch_size=3",
                      "--max_batch_size=3", "--max_num_threads=1"},
                     log);
  const std::string out = readFile(log);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("65536"), std::string::npos) << out;
  EXPECT_EQ(out.find("mismatch"), std::string::npos) << out;
}

TEST_F(TebenchRoundTrip, QosRunWritesParsableJsonl) {
  const std::string log = tempPath("qos.log");
  const std::string jsonl = tempPath("qos.jsonl");
  const std::string dump = tempPath("qos_cdf.json");
  std::remove(jsonl.c_str());
  int rc = initiator(
      {"--check_consistency", "--duration=0.5", "--warmup=0.2",
       R"(--workload_classes_json=[
          {"name":"foreground","threads":1,"block_size":4096,"intent_type":"foreground_get",
           "slo_us":100000,"weight":4},
          {"name":"migration","threads":1,"block_size":262144,"batch_size":2,
           "intent_type":"migration"}])",
       "--qos_output_jsonl=" + jsonl, "--qos_latency_dump=" + dump, "--run_label=roundtrip"},
      log);
  ASSERT_EQ(rc, 0) << readFile(log);
  std::ifstream in(jsonl);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << readFile(log);
  json rec = json::parse(line, nullptr, false);
  ASSERT_FALSE(rec.is_discarded()) << line;
  EXPECT_EQ(rec["schema_version"], 1);
  EXPECT_EQ(rec["provider"], "soft");
  EXPECT_EQ(rec["run_label"], "roundtrip");
  ASSERT_EQ(rec["classes"].size(), 2u);
  for (const auto& c : rec["classes"]) {
    EXPECT_GT(c["operations"].get<uint64_t>(), 0u) << c.dump();
    EXPECT_EQ(c["failed_transfers"], 0) << c.dump();
  }
  EXPECT_TRUE(rec["direct"].contains("attempted"));
  json cdf = json::parse(readFile(dump), nullptr, false);
  ASSERT_FALSE(cdf.is_discarded());
  EXPECT_EQ(cdf["classes"][0]["count"], rec["classes"][0]["operations"]);
}

TEST_F(TebenchRoundTrip, UnknownSegmentFailsCleanly) {
  Child c = spawn({"--target_seg_name=127.0.0.1:1", "--config=" + config_, "--duration=0.1",
                   "--total_buffer_size=1M"},
                  tempPath("unknown.log"));
  EXPECT_EQ(waitExit(c.pid, std::chrono::seconds(60)), 1) << readFile(tempPath("unknown.log"));
}

TEST(TebenchFlags, BadFlagExitsTwoWithUsage) {
  const std::string log = tempPath("bad.log");
  Child c = spawn({"--target_seg_name=h:1", "--op_type=delete"}, log);
  EXPECT_EQ(waitExit(c.pid, std::chrono::seconds(30)), 2);
  const std::string out = readFile(log);
  EXPECT_NE(out.find("--op_type"), std::string::npos) << out;
  EXPECT_NE(out.find("usage:"), std::string::npos) << out;
  Child bad_json =
      spawn({"--target_seg_name=h:1", R"(--workload_classes_json=[{"name":"a"}])"}, log);
  EXPECT_EQ(waitExit(bad_json.pid, std::chrono::seconds(30)), 2);
  EXPECT_NE(readFile(log).find("field 'threads'"), std::string::npos) << readFile(log);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TEBENCH_BINARY [gtest flags]\n", argv[0]);
    return 2;
  }
  g_tebench = argv[1];
  return RUN_ALL_TESTS();
}
