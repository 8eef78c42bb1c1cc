// The hostile-input suite (docs/RELIABILITY.md, section 11): one table, a row per
// way a user or a script can hand the tools something wrong. Each row is a command,
// the exit status it must end with, a fragment of the message it must print, and
// the same checks after every row: no shared-memory segment of ours left, no
// temporary left in the folder, and no input or earlier output changed (each file
// of the folder is compared byte for byte with what it held before the row ran).
#include <sys/stat.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hogwild/checkpoint.hpp"
#include "support.hpp"

using namespace hogwild;

namespace {

struct Row {
  const char* what;               // the case, as the table in RELIABILITY.md names it
  std::string command;            // run by /bin/sh; {T} hogwild_train, {D} hogwild_data
  int exit_code;
  std::string says;               // a fragment of the output
};

// Every regular file under `dir`, by name, with its bytes.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().string()] = test::read_text(e.path().string());
  return out;
}

std::string expand(std::string s, const std::map<std::string, std::string>& vars) {
  for (const auto& [key, value] : vars)
    for (std::size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), value);
  return s;
}

}  // namespace

TEST_CASE("hostile input: each row ends with its exit status and message, leaving nothing behind") {
  if (test::skip_cli_under_tsan()) return;
  test::TempDir dir;
  const auto [train, test_file] = test::problem_files(dir, 400);
  const std::string d = dir.path().string();
  // What the rows are given: a malformed file, an empty one, an earlier run's outputs.
  test::write_text(dir.file("bad.svm"), "1 1:1\n-1 2:1\n1 4:x\n");
  test::write_text(dir.file("hashed.svm"), "1 4294967295:1\n0 3:1\n");  // a 2^32 feature space
  test::write_text(dir.file("one_class.svm"), "1 1:1\n1 2:1\n1 3:0.5\n");
  test::write_text(dir.file("f32.svm"), "3 1:1\n16777216 2:1\n16777217 3:1\n");
  test::write_text(dir.file("empty.svm"), "");
  test::write_text(dir.file("words.txt"), "hello world\nfoo bar\n");
  test::write_text(dir.file("program.bin"), std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10));
  test::write_text(dir.file("keep.json"), "{\"an earlier run\": true}\n");
  test::write_text(dir.file("keep.jsonl"), "{\"epoch\": 1}\n{\"epoch\": 2}\n{\"epoch\": 3}\n");
  test::write_text(dir.file("extra.toml"), "epochs = 1\nfrobnicate = 3\n");
  test::write_text(dir.file("list.toml"), "epochs = 1\nlr = [1,2\n");
  test::write_text(dir.file("costs.json"), "{\"write_ns\": -1}");
  test::write_text(dir.file("cut.json"), "{\"write_ns\": 3,");
  test::write_text(dir.file("queue.json"), "{\"queue\": \"yes\"}");
  test::write_text(dir.file("recent.json"), "{\"recent_writes\": 2.5}");
  test::write_text(dir.file("slow.json"), "{\"example_ns\": 1e16}");
  test::write_text(dir.file("huge.json"), "{\"write_ns\": 1e400}");
  test::write_text(dir.file("nan.tsv"), "1\t2\tnan\n2\t1\t4\n");
  test::write_text(dir.file("comment.svm"), "1 # no features, a comment\n0 3:1\n");
  test::write_text(dir.file("wide.svm"), "1 100000:1 100001:1\n0 1:1\n");  // features past any model's
  REQUIRE(::mkfifo(dir.file("costs.fifo").c_str(), 0600) == 0);  // nobody writes it
  std::filesystem::create_directory(dir.file("a_folder"));
  // Two 2x2 IDX images and their labels (big-endian headers).
  test::write_text(dir.file("img.idx"), std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x02\0\0\0\x02"
                                                    "\x01\x02\x03\x04\x05\x06\x07\x08", 24));
  test::write_text(dir.file("lab.idx"), std::string("\0\0\x08\x01\0\0\0\x02\x01\x00", 10));
  // The same pair named as MNIST names them: the labels are found beside the images.
  test::write_text(dir.file("i-images-idx3-ubyte"), test::read_text(dir.file("img.idx")));
  test::write_text(dir.file("i-labels-idx1-ubyte"), test::read_text(dir.file("lab.idx")));
  test::write_text(dir.file("ok.toml"), "epochs = 1\n");
  test::write_text(dir.file("ok_costs.json"), "{\"write_ns\": 3}");
  REQUIRE(test::run({test::hogwild_train_path(), "--train", train, "--epochs", "1", "-q",
                     "--checkpoint", dir.file("ck.bin")}).exit_code == 0);
  REQUIRE(test::run({test::hogwild_train_path(), "--train", train, "--epochs", "1", "-q", "--mode",
                     "simulated", "--workers", "2", "--checkpoint", dir.file("sim.ck")}).exit_code == 0);
  REQUIRE(test::run({test::hogwild_train_path(), "--train", train, "--epochs", "1", "-q",
                     "--workers", "2", "--layout", "hot", "--checkpoint", dir.file("hot.ck")})
              .exit_code == 0);
  REQUIRE(test::run({test::hogwild_data_path(), "convert", train, "--out", dir.file("c.cache")})
              .exit_code == 0);
  REQUIRE(test::run({test::hogwild_train_path(), "--train", train, "--epochs", "1", "-q",
                     "--save-model", dir.file("m.st")}).exit_code == 0);
  const std::string model = test::read_text(dir.file("m.st"));
  test::write_text(dir.file("cut.st"), model.substr(0, model.size() / 2));
  // A label's sign bit flipped in the cache; a byte of the checkpoint's weights flipped.
  std::string cache = test::read_text(dir.file("c.cache"));
  cache[256 + 3] = static_cast<char>(cache[256 + 3] ^ 0x80);  // a label (they fill 128..1728)
  test::write_text(dir.file("flipped.cache"), cache);
  std::string ck = test::read_text(dir.file("ck.bin"));
  ck[ck.size() - 9] = static_cast<char>(ck[ck.size() - 9] ^ 0x01);
  test::write_text(dir.file("flipped.ck"), ck);

  const std::map<std::string, std::string> vars{
      {"{T}", fmt::format("\"{}\"", test::hogwild_train_path())},
      {"{D}", fmt::format("\"{}\"", test::hogwild_data_path())},
      {"{P}", fmt::format("\"{}\"", std::getenv("HOGWILD_PREDICT"))},
      {"{S}", fmt::format("\"{}/hogwild_sweep\"",
                          std::filesystem::path(test::hogwild_train_path()).parent_path().string())},
      {"{train}", train}, {"{test}", test_file}, {"{dir}", d}};
  std::vector<Row> rows = {
      // Options: counts, ranges, names, combinations.
      {"a negative count", "{T} --train {train} --batch -1", 2,
       "--batch: expected a whole number of 0 or more, got -1"},
      {"a negative seed", "{T} --train {train} --seed -1", 2,
       "--seed: expected a whole number of 0 or more, got -1"},
      {"a count not whole", "{T} --train {train} --epochs 1e9", 2,
       "--epochs: expected a whole number of 0 or more, got 1e9"},
      {"too many parser threads", "{T} --train {train} --threads 100000", 2,
       "--threads: expected 0 (all cores) to 1024, got 100000"},
      {"no workers", "{T} --train {train} --workers 0", 2, "--workers"},
      {"a timeout of 0", "{T} --train {train} --mode ddp --comm-timeout 0", 2,
       "--comm-timeout must be more than 0 and at most 86400 seconds, got 0"},
      {"a negative stall timeout", "{T} --train {train} --stall-timeout -1", 2,
       "--stall-timeout must be from 0 to 86400 seconds, got -1"},
      {"an unknown mode", "{T} --train {train} --mode wild", 2, "unknown mode \"wild\""},
      {"a mode's option under another mode", "{T} --train {train} --stripes 8", 2,
       "--stripes applies to --mode striped"},
      {"a mode's option out of its range", "{T} --train {train} --mode striped --stripes 4096", 2,
       "--stripes 4096 is out of range (1 to 1024)"},
      {"an instrument on a mode it cannot watch", "{T} --train {train} --mode ps --conflicts", 2,
       "--conflicts watches the writes of --mode serial, hogwild, atomic, lock or striped to the "
       "shared weights, not --mode ps"},
      {"hogwild's node sync asked of a mode with its own",
       "{T} --train {train} --mode ps --nodes 2 --sync-every 500 --rendezvous file:{dir}", 2,
       "--sync-every works with --nodes 2 or more and --mode hogwild, atomic, lock or striped"},
      {"an option given twice", "{T} --train {train} --lr 1 --lr 2", 2,
       "--lr: At Most 1 required but received 2"},
      {"a config file's key no option has", "{T} --train {train} --config {dir}/extra.toml", 2,
       "INI was not able to parse frobnicate"},
      {"a config file's list (CLI11 read a cut-short one as its first item)",
       "{T} --train {train} --config {dir}/list.toml", 2,
       "list.toml:2: an option takes one value, not a list: lr = [1,2"},
      {"a config file that is missing", "{T} --train {train} --config {dir}/missing.toml", 2,
       "missing.toml was not readable"},
      {"a negative step size", "{T} --train {train} --lr -1", 2, "--lr"},
      {"an unknown option", "{T} --train {train} --frobnicate", 2,
       "The following argument was not expected: --frobnicate"},
      {"a GPU option on the CPU", "{T} --train {train} --device-warps 8", 2,
       "--device-warps applies to --device cuda only"},
      {"a checkpoint interval without a checkpoint", "{T} --train {train} --checkpoint-every 5",
       2, "--checkpoint-every needs --checkpoint"},
      // Inputs.
      {"a missing file", "{T} --train {dir}/missing.svm", 2, "missing.svm"},
      {"a malformed row", "{T} --train {dir}/bad.svm", 2, "bad.svm:3: expected \"index:value\""},
      {"a ratings file whose first rating is not a number",
       "{T} --train {dir}/nan.tsv --model mf", 2, "nan.tsv:1: rating \"nan\" is not finite"},
      {"a libsvm row of a label and a comment (three fields, yet not ratings)",
       "{T} --train {dir}/comment.svm --epochs 1", 0, "done: 2 samples"},
      {"a malformed row on standard input", "printf '1 3:x\\n' | {T} --train -", 2,
       "standard input:1: expected \"index:value\""},
      {"a text file of no format", "{T} --train {dir}/words.txt", 2,
       "words.txt:1: expected a label (number) but found \"hello\"; the file is none of the "
       "formats hogwild reads, tried in this order: the binary cache"},
      {"a binary file of no format", "{T} --train {dir}/program.bin", 2,
       "program.bin:1: expected a label (number)"},
      {"an empty test set", "{T} --train {train} --test {dir}/empty.svm", 2,
       "has no rows: nothing to evaluate on"},
      {"a labels file for libsvm text", "{T} --train {train} --train-labels {test}", 2,
       "a labels file is only used with IDX images"},
      {"a cache with a flipped bit", "{T} --train {dir}/flipped.cache", 2,
       "the labels section does not match its checksum"},
      {"IDX images and labels both on standard input",
       "cat {dir}/img.idx | {T} --train - --train-labels - --model softmax", 2,
       "standard input cannot hold both the IDX images and their labels"},
      {"IDX labels cut short on standard input",
       "head -c 9 {dir}/lab.idx | {T} --train {dir}/img.idx --train-labels - --model softmax", 2,
       "standard input: truncated: the header declares 2 labels"},
      {"a checkpoint with a flipped bit", "{T} --train {train} --epochs 2 --resume {dir}/flipped.ck",
       2, "checksum mismatch in the tensor 2 ('param:b') section (bytes "},
      {"a data file as the checkpoint", "{T} --train {train} --resume {train}", 2,
       "not a hogwild checkpoint"},
      {"a refused resume keeps the metrics",
       "{T} --train {train} --epochs 3 --model hinge --resume {dir}/ck.bin --metrics {dir}/keep.jsonl",
       2, "cannot resume from"},
      {"a malformed row for stats", "{D} stats --train {dir}/bad.svm", 2, "bad.svm:3:"},
      {"a resume of --layout hot's run without it: the K to give is named",
       "{T} --train {train} --epochs 2 --workers 2 --resume {dir}/hot.ck", 2,
       "which --layout hot chose or --hot-k gave: resume with --hot-k"},
      // Outputs.
      {"an output naming an input", "{T} --train {train} --metrics {train}", 2,
       "is the --train file: writing it would overwrite that input"},
      {"two outputs one file", "{T} --train {train} --summary {dir}/keep.json --metrics {dir}/keep.json",
       2, "give each output its own path"},
      {"an output that is a folder", "{T} --train {train} --summary {dir}/a_folder", 2,
       "it is a directory"},
      {"an output in a missing folder", "{T} --train {train} --checkpoint {dir}/no/such/ck.bin", 2,
       "no directory"},
      {"two JSON streams on stdout", "{T} --train {train} --metrics - --summary -", 2,
       "would mix on standard output"},
      {"JSON streams mixed through /dev/stdout", "{T} --train {train} --metrics /dev/stdout --summary -",
       2, "would mix on standard output"},
      {"a checkpoint to standard output", "{T} --train {train} --checkpoint -", 2,
       "a checkpoint is a file that each save replaces whole"},
      {"stats JSON over its input", "{D} stats --train {train} --json {train}", 2,
       "writing it would overwrite that input"},
      {"a generated count below 1", "{D} generate --rows -5 --out {dir}/g.svm", 2,
       "--rows: expected a whole number of at least 1, got -5"},
      {"a subcommand's negative seed", "{D} generate --rows 10 --seed -1 --out {dir}/g.svm", 2,
       "--seed: expected a whole number of 0 or more, got -1"},
      {"too many threads for info", "{D} info {train} --threads 100000", 2,
       "--threads: expected 0 (all cores) to 1024"},
      // Model files: --save-model, --init-from, hogwild_predict.
      {"a data file as the model", "{P} --model {train} --data {test}", 2, "not a model file"},
      {"a checkpoint as the model", "{P} --model {dir}/ck.bin --data {test}", 2, "not a model file"},
      {"a truncated model", "{P} --model {dir}/cut.st --data {test}", 2, "truncated"},
      {"a missing model", "{P} --model {dir}/none.st --data {test}", 2, "cannot open model file"},
      {"predictions over their data", "{P} --model {dir}/m.st --data {test} --output {test}", 2,
       "is the --data file"},
      {"more top classes than the model has", "{P} --model {dir}/m.st --data {test} --top 3", 2,
       "has 2 classes"},
      {"a model's rows of another kind", "{P} --model {dir}/m.st --data {dir}/img.idx --labels {dir}/lab.idx", 0,
       "accuracy"},
      {"a warm start from another model", "{T} --train {train} --model softmax --init-from {dir}/m.st",
       2, "holds model logistic, and this run trains softmax"},
      {"a warm start from a truncated model", "{T} --train {train} --init-from {dir}/cut.st", 2,
       "truncated"},
      {"a model and a summary on standard output", "{T} --train {train} --save-model - --summary -",
       2, "would mix on standard output"},
      {"a model over its training file", "{T} --train {train} --save-model {train}", 2,
       "is the --train file"},
      {"a config and the data both on standard input", "echo 'epochs = 1' | {T} --config - --train -",
       2, "--config - and --train - both read standard input"},
      {"a model from an empty pipe", "true | {P} --model - --data {test}", 2,
       "standard input: not a model file: 0 bytes"},
      {"a checkpoint from a pipe of something else", "cat {train} | {T} --train {train} --resume -", 2,
       "standard input"},
      {"a model and its data both on standard input", "cat {dir}/m.st | {P} --model - --data -", 2,
       "--model - and --data - both read standard input"},
      {"a warm start and the data both on standard input", "cat {dir}/m.st | {T} --train - --init-from -",
       2, "--train - and --init-from - both read standard input"},
      {"probabilities and top classes at once", "{P} --model {dir}/m.st --data {test} --probabilities --top 1",
       2, "choose one"},
      {"nothing to predict", "{P} --model {dir}/m.st --data {dir}/empty.svm", 2, "has no rows: nothing to predict"},
      {"a test count without a test file", "{D} generate --rows 10 --out {dir}/g.svm --test-rows 5", 2,
       "--test-rows: give --test-out FILE"},
      {"a simulated cost model with a negative cost",
       "{T} --train {train} --mode simulated --workers 4 --cost-model {dir}/costs.json", 2,
       "costs.json: write_ns must be a number of nanoseconds >= 0, not -1"},
      {"a simulated cost model with a number past a double",
       "{T} --train {train} --mode simulated --workers 4 --cost-model {dir}/huge.json", 2,
       "huge.json: a number out of range"},
      {"a simulated cost model cut short", "{T} --train {train} --mode simulated --cost-model {dir}/cut.json",
       2, "cut.json: not JSON"},
      {"a simulated cost model that is missing",
       "{T} --train {train} --mode simulated --cost-model {dir}/none.json", 2,
       "none.json: cannot be read"},
      {"a simulated cost model whose queue is not true or false",
       "{T} --train {train} --mode simulated --workers 4 --cost-model {dir}/queue.json", 2,
       "queue.json: queue must be true or false, not \"yes\""},
      {"a simulated cost model whose recent writes are not a whole number",
       "{T} --train {train} --mode simulated --workers 4 --cost-model {dir}/recent.json", 2,
       "recent.json: recent_writes must be a whole number of writes from 0 to 4294967295, not 2.5"},
      {"a simulated cost model on a named pipe (read twice; nobody writes this one)",
       "{T} --train {train} --mode simulated --workers 4 --cost-model {dir}/costs.fifo", 2,
       "costs.fifo: not a regular file"},
      {"a simulated cost model whose clock passes its 4.9 hours",
       "{T} --train {train} --mode simulated --workers 4 --cost-model {dir}/slow.json", 4,
       "the simulated clock passed 4.9 hours, its limit"},
      {"a simulated run resumed with another access",
       "{T} --train {train} --epochs 2 --mode simulated --workers 2 --simulate-access atomic "
       "--resume {dir}/sim.ck", 2,
       "it was written with --simulate-access hogwild; this run has --simulate-access atomic"},
      {"an access the simulator does not have", "{T} --train {train} --mode simulated --simulate-access stripy",
       2, "choose hogwild, atomic, lock or striped"},
      {"stripes for a simulated access that has none",
       "{T} --train {train} --mode simulated --workers 4 --simulate-access lock --stripes 8", 2,
       "--stripes applies to --simulate-access striped, not lock"},
      {"stripes out of range for the simulated striped access",
       "{T} --train {train} --mode simulated --simulate-access striped --stripes 0", 2,
       "--stripes 0 is out of range (1 to 1024)"},
      {"a layout that does not exist", "{T} --train {train} --workers 2 --layout sideways", 2,
       "--layout must be auto, plain, hot or replicas, got \"sideways\""},
      {"a layout that --merge-every contradicts",
       "{T} --train {train} --workers 2 --layout plain --merge-every 64", 2,
       "--layout plain and --merge-every exclude each other"},
      {"an interval neither a number nor auto", "{T} --train {train} --workers 2 --merge-every autox", 2,
       "--merge-every: expected auto or a whole number of 0 to 1099511627776, got \"autox\""},
      {"a flush interval of 0", "{T} --train {train} --workers 2 --hot-k 8 --hot-flush 0", 2,
       "--hot-flush 0 is out of range (1 to 1073741824)"},
      {"a flush interval below 0", "{T} --train {train} --workers 2 --hot-k 8 --hot-flush -5", 2,
       "--hot-flush: expected auto or a whole number of 1 to 1073741824, got \"-5\""},
      {"a flush interval where no hot window can be",
       "{T} --train {train} --workers 2 --layout plain --hot-flush 100", 2,
       "--hot-flush paces hot coordinates' flushes (--layout hot, --hot-k, or --layout auto's "
       "choice under --mode hogwild); this run has none (--layout plain)"},
      // (Refused before the data is read: the training file here does not exist.)
      {"timed evaluations with nothing to evaluate", "{T} --train {dir}/missing.svm --eval-every 0.5", 2,
       "--eval-every 0.5 evaluates the weights on the test set: give --test"},
      {"a layout under a mode without one", "{T} --train {train} --workers 2 --mode atomic --layout replicas",
       2, "--layout applies to --mode hogwild, not atomic"},
      {"a balance that does not exist", "{T} --train {train} --workers 2 --balance dynamic", 2,
       "--balance must be steal or static, got \"dynamic\""},
      {"a balance under a mode without one", "{T} --train {train} --workers 2 --mode lock --balance static",
       2, "--balance applies to --mode hogwild, not lock"},
      {"telemetry of a private copy", "{T} --train {train} --workers 2 --layout replicas --telemetry", 2,
       "--telemetry measures updates made to the shared weights, and --layout replicas trains a "
       "private copy"},
      {"hot coordinates for a model that has none",
       "{T} --train {train} --workers 2 --model mlp --hidden 4 --layout hot", 2,
       "--layout hot works with the linear models (logistic, hinge, squared), not mlp"},
      // Inputs read without being named as data: outputs may not overwrite them either.
      {"a summary over the config file", "{T} --train {train} --config {dir}/ok.toml --summary {dir}/ok.toml",
       2, "ok.toml is the --config file: writing it would overwrite that input"},
      {"a summary over the cost model",
       "{T} --train {train} --mode simulated --workers 2 --cost-model {dir}/ok_costs.json "
       "--summary {dir}/ok_costs.json", 2, "is the --cost-model file"},
      {"a summary over the IDX labels found beside the images",
       "{T} --train {dir}/i-images-idx3-ubyte --model softmax --summary {dir}/i-labels-idx1-ubyte", 2,
       "is the --train-labels (found beside --train) file"},
      {"a conversion over the labels beside its images",
       "{D} convert {dir}/i-images-idx3-ubyte --out {dir}/i-labels-idx1-ubyte", 2,
       "is the --labels (found beside the input) file"},
      {"statistics over the labels beside their images",
       "{D} stats --train {dir}/i-images-idx3-ubyte --json {dir}/i-labels-idx1-ubyte", 2,
       "is the --labels (found beside --train) file"},
      {"predictions over the labels beside their images",
       "{P} --model {dir}/m.st --data {dir}/i-images-idx3-ubyte --output {dir}/i-labels-idx1-ubyte", 2,
       "is the --labels (found beside --data) file"},
      // Standard output closed before the first line (the reader gone): nothing trains.
      {"standard output closed before training",
       "(sleep 0.3; {T} --train {train} --summary {dir}/never.json; echo \"exit $?\" >&2) | true", 0,
       "standard output closed before training; not started\nexit 141"},
      {"a test split of no rows", "{D} generate --rows 10 --out {dir}/g.svm --test-out {dir}/t.svm --test-rows 0",
       2, "--test-rows 0"},
      // Empty inputs and a NaN that compares false with every bound.
      {"an empty training set", "{T} --train {dir}/empty.svm", 2,
       "empty.svm has no rows: nothing to train on"},
      {"a conversion of an empty file", "{D} convert {dir}/empty.svm --out {dir}/e.cache", 2,
       "empty.svm has no rows: nothing to convert"},
      {"a sweep mode that is none", "{S} --train {train} --test {test} --mode hogwild,bogus --out {dir}/sweep",
       2, "--mode bogus: not a mode; give MODE (serial, hogwild"},
      {"a step size that diverges with two workers: their examples, not a global step",
       "{T} --train {train} --model squared --lr 1e6 --workers 2 --epochs 2", 1,
       "examples by 2 workers: weight w["},
      {"training labels of one class for a binary model: trained, with a warning",
       "{T} --train {dir}/one_class.svm --epochs 1", 0,
       "one_class.svm is 1: the model learns one class, and its accuracy says nothing"},
      {"predictions to /dev/stdout: the report lines stay out of them",
       "n=$({P} --model {dir}/m.st --data {test} --output /dev/stdout 2>/dev/null | grep -c predicted); "
       "echo \"report lines among the predictions: $n\"", 0, "report lines among the predictions: 0"},
      {"predictions to a closed standard output: said, exit 141",
       "(sleep 0.3; {P} --model {dir}/m.st --data {test}; echo \"exit $?\" >&2) | true", 0,
       "(cannot write -: Broken pipe)\nexit 141"},
      {"generated rows and their test rows both on standard output",
       "{D} generate --rows 10 --out - --test-out /dev/stdout", 2,
       "--out and --test-out would mix on standard output"},
      {"an L2 past a float's range (it became 0: no regularisation)", "{T} --train {train} --l2 1e39", 2,
       "--l2 1e39: out of a float's range"},
      {"a step size below a float's range", "{T} --train {train} --lr 1e-50", 2,
       "--lr 1e-50: out of a float's range"},
      {"a flag given false in a config file (refused with an empty value)",
       "printf 'no-bias = false\\n' | {T} --train {train} --epochs 1 --config -", 0, "done: "},
      {"a flag given neither true nor false (std::stoll's exception, exit 1)",
       "{T} --train {train} --digest=maybe", 2, "--digest maybe: a flag takes true or false"},
      {"class labels a float merges (16777217 read as 16777216)",
       "{T} --train {dir}/f32.svm --model softmax", 2,
       "class label 16777216 in"},
      {"rating triples for a model of features (user and item ids read as one feature space)",
       "printf '1\\t2\\t1\\n2\\t1\\t0\\n' | {T} --train - --model logistic", 2,
       "model logistic needs feature rows"},
      {"--cleanup given with training (it cleaned up, trained nothing and exited 0)",
       "{T} --cleanup --train {train} --epochs 1", 2, "--cleanup removes what dead runs left and exits"},
      {"an instrument's setting without the instrument", "{T} --train {train} --epochs 1 --telemetry-every 5",
       0, "warning: --telemetry-every applies with --telemetry; this run ignores it"},
      {"a sweep's --train-option of an option the grid sets (the grid's value won, silently)",
       "{S} --train {train} --test {test} --train-option lr=3 --out {dir}/sweep", 2,
       "--train-option lr=...: the sweep sets --lr itself"},
      {"starting weights from both a model and a checkpoint (the checkpoint's won, silently)",
       "{T} --train {train} --epochs 3 --resume {dir}/ck.bin --init-from {dir}/m.st", 2,
       "--init-from and --resume both give the starting weights"},
      {"generated ratings given a sparse set's size (it was ignored: 100000 ratings)",
       "{D} generate --kind ratings --rows 10 --out {dir}/g.tsv", 2,
       "--rows is for --kind sparse; ratings take --users, --items, --rank and --ratings"},
      {"a Zipf exponent that is not a number", "{D} generate --rows 10 --zipf nan --out {dir}/g.svm", 2,
       "the Zipf exponent must be between 0 and 10, not nan"},
      // Outputs elsewhere (a folder of the row's own, gone after it): what they hold
      // is what the row checks.
      {"the metrics' disk full mid-run (a line left cut, and no final checkpoint or summary)",
       "export t=$(mktemp -d); mkdir $t/full $t/out; unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs "
       "$t/full && head -c 60k /dev/zero > $t/full/pad; {T} --train {train} --test {test} --epochs 200 "
       "-q --metrics $t/full/m.jsonl --checkpoint $t/out/ck.bin --summary $t/out/s.json; echo \"exit $?\"; "
       "echo \"last byte $(tail -c 1 $t/full/m.jsonl | od -An -tx1 | tr -d \" \")\"; "
       "grep -c \"output full\" $t/out/s.json; test -s $t/out/ck.bin && echo checkpoint kept'; rm -rf $t",
       0, "the lines written before are intact\nexit 4\nlast byte 0a\n1\ncheckpoint kept"},
      {"a training file named in bytes that are not UTF-8 (the summary's JSON threw once trained)",
       "export t=$(mktemp -d); cp {train} \"$t/$(printf 'r\\377.svm')\"; {T} --train \"$t/$(printf "
       "'r\\377.svm')\" --epochs 1 -q --summary $t/s.json --worker-start fork-server; echo \"exit $?\"; "
       "grep -c '\"train\"' $t/s.json; rm -rf $t", 0, "exit 0\n1"},
      {"a simulated mini-batch writing more than twice the model's coordinates (stopped, exit 4)",
       "export t=$(mktemp -d); {D} generate --rows 400 --features 50 --nnz-per-row 10 --out $t/s.svm "
       "> /dev/null; {T} --train $t/s.svm --mode simulated --workers 2 --batch 100 --epochs 1 -q; "
       "echo \"exit $?\"; rm -rf $t", 0, "done: 400 samples"},
      {"standard output closed (>&-) with the summary given to it (fd 1 reused: a wrong error, after "
       "the training)", "({T} --train {train} --epochs 1 --summary - >&-)", 2,
       "--summary -: standard output is closed (>&-)"},
      {"standard output appended to the training file (the lines printed landed in it)",
       "export t=$(mktemp -d); cp {train} $t/a.svm; ({T} --train $t/a.svm --epochs 1 >> $t/a.svm) 2>&1; "
       "echo \"exit $?\"; cmp $t/a.svm {train} && echo intact; rm -rf $t", 0,
       "would land in that input; redirect it elsewhere\nexit 2\nintact"},
      {"predictions appended to the model file they come from (a model no longer loaded)",
       "export t=$(mktemp -d); cp {dir}/m.st $t/m.st; ({P} --model $t/m.st --data {test} -q >> $t/m.st) 2>&1; "
       "echo \"exit $?\"; cmp $t/m.st {dir}/m.st && echo intact; rm -rf $t", 0,
       "would land in that input; redirect it elsewhere\nexit 2\nintact"},
      {"rows whose features are mostly past the model's (dropped in silence: another numbering?)",
       "{P} --model {dir}/m.st --data {dir}/wide.svm -q --output /dev/null", 0,
       "warning: 2 of the rows' 3 non-zeros (66.7%) are of features past the model's"},
      {"more sampled pairs than their 32-bit stamps count (it never ended)",
       "{D} stats --train {train} --pairs 4294967296", 2, "--pairs 4294967296: at most 4294967294 pairs"},
      {"a device for data (/dev/zero: read until the memory ran out)", "{T} --train /dev/zero", 2,
       "/dev/zero: a device, not a file or a pipe"},
      {"an arena folder of no size (/proc)", "{T} --train {train} --epochs 1 --shm-dir /proc", 4,
       "/proc holds no files"},
      {"a sweep resumed on other data of the same name (its runs were taken for these)",
       "export t=$(mktemp -d); cp {train} $t/a.svm; {S} --train $t/a.svm --test {test} --out $t/sw --mode "
       "serial --workers 1 --seeds 1 --epochs 1 > /dev/null; echo '1 1:1' >> $t/a.svm; {S} --train "
       "$t/a.svm --test {test} --out $t/sw --mode serial --workers 1 --seeds 1 --epochs 1; "
       "echo \"exit $?\"; rm -rf $t", 0, "its runs would be taken for these; give another --out\nexit 2"},
      {"a second sweep into a folder one is writing (every cell ran twice, under each other's load)",
       "export t=$(mktemp -d); mkdir $t/sw; (flock $t/sw/.lock sleep 3 &); sleep 0.3; {S} --train {train} "
       "--test {test} --out $t/sw --mode serial --workers 1 --seeds 1 --epochs 1; echo \"exit $?\"; rm -rf $t",
       0, "now: wait for it, or give another --out\nexit 2"},
      {"a sweep's sweep.json cut short (its resume checks were skipped)",
       "export t=$(mktemp -d); mkdir $t/sw; echo '{' > $t/sw/sweep.json; {S} --train {train} --test {test} "
       "--out $t/sw --mode serial --workers 1 --seeds 1 --epochs 1; echo \"exit $?\"; rm -rf $t", 0,
       "sweep.json:2: not JSON"},
      {"step sizes the same to the 6 digits that name the runs' folders (one run overwrote the other)",
       "{S} --train {train} --test {test} --lr 0.1,0.10000001 --out {dir}/sweep", 2,
       "are the same to 6 significant digits"},
  };
  // A hashed feature space of 2^32 under a 4 GB address-space limit, which a
  // sanitized build cannot start under (its shadow memory).
  if (!test::kSanitized) {
    rows.push_back({"a feature index of 2^32 - 1 under a 4 GB address-space limit (a table a "
                    "feature, 16 GiB, was built before the memory check)",
                    "ulimit -v 4000000; {T} --train {dir}/hashed.svm --workers 2", 4,
                    "parameter arena (weights) 16.0 GiB"});  // (over MemAvailable, or the limit)
    rows.push_back({"statistics of a 2^32 feature space under a 4 GB address-space limit",
                    "ulimit -v 4000000; {D} stats --train {dir}/hashed.svm", 0, "feature 4294967294"});
  }
  // hogwild_plot on a run folder whose summary was cut short (a run killed while
  // writing it): where matplotlib is installed (scripts/install-deps.sh), as the
  // study suite's figures are.
  if (test::run({"/usr/bin/python3", "-c", "import matplotlib"}).exit_code == 0) {
    std::filesystem::create_directory(dir.file("cut_run"));
    test::write_text(dir.file("cut_run/summary.json"), "{\"samples\": ");
    const std::string plot = fmt::format(
        "\"{}/hogwild_plot\"", std::filesystem::path(test::hogwild_train_path()).parent_path().string());
    rows.push_back({"a run's summary cut short, for the plot", plot + " {dir}/cut_run --out {dir}/cut_plots",
                    2, "cut_run/summary.json:1: not JSON"});
    std::filesystem::create_directory(dir.file("list_run"));
    test::write_text(dir.file("list_run/summary.json"), "[]\n");
    rows.push_back({"a run's summary that is JSON but no object (a traceback)",
                    plot + " {dir}/list_run --out {dir}/list_plots", 2,
                    "list_run/summary.json: a JSON object is wanted, not list"});
    rows.push_back({"the figures of a sweep whose runs never moved from the start (f0 = f*: a division "
                    "by zero)",
                    "export t=$(mktemp -d); {S} --train {train} --test {test} --out $t/z --mode serial "
                    "--workers 1 --seeds 1 --epochs 1 --lr 1e-30 > /dev/null; " + plot +
                        " $t/z > /dev/null; echo \"exit $?\"; rm -rf $t",
                    0, "no suboptimality figure: the starting loss f0 = 0.69315 is not above the best f* = "
                       "0.69315\nexit 0"});
  }
  const auto before = contents(d);
  for (const Row& row : rows) {
    CAPTURE(row.what);
    const std::string command = expand(row.command, vars);
    CAPTURE(command);
    const auto r = test::run({"/bin/sh", "-c", fmt::format("{} 2>&1", command)});
    INFO(r.out);
    CHECK(r.exit_code == row.exit_code);
    CHECK(r.out.find(row.says) != std::string::npos);
    CHECK(test::our_shm_entries().empty());
    const auto after = contents(d);  // nothing new (no temporary), nothing changed
    for (const auto& [path, text] : after) {
      const std::string file = path;  // (clang 14 captures no structured binding)
      CAPTURE(file);
      const auto was = before.find(path);
      CHECK(was != before.end());
      if (was != before.end()) CHECK(was->second == text);
    }
    CHECK(after.size() == before.size());
  }
  MESSAGE(rows.size() << " hostile rows");
}
