// Times one LIBSOL (github.com/LIBOL/SOL) learner on mini-batches already in memory, for
// benchmarks/online.py. LIBSOL's own sol_train starts its clock before its reader thread
// has decoded the file, so its figure is the reader's as much as the learner's; here every
// batch is read first and then replayed, so the time is learning alone, as ours is timed.
//
// usage: libsol_harness ALGO 'name=value;...' TRAIN.bin [TEST.bin]
// prints: seconds <learning seconds> train_accuracy <a> [test_accuracy <a>]
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <sol/sol.h>
#include <sol/util/str_util.h>

namespace {

// Hands out batches read beforehand, one after another.
class ReplayIter : public sol::pario::DataIter {
 public:
  explicit ReplayIter(std::vector<sol::pario::MiniBatch*> batches)
      : DataIter(1, 1), batches_(std::move(batches)) {}
  sol::pario::MiniBatch* Next(sol::pario::MiniBatch*) override {
    return next_ < batches_.size() ? batches_[next_++] : nullptr;
  }

 private:
  std::vector<sol::pario::MiniBatch*> batches_;
  size_t next_ = 0;
};

std::vector<sol::pario::MiniBatch*> read_all(sol::pario::DataIter* source) {
  std::vector<sol::pario::MiniBatch*> batches;
  for (sol::pario::MiniBatch* batch; (batch = source->Next(nullptr)) != nullptr;)
    batches.push_back(batch);
  return batches;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s ALGO 'name=value;...' TRAIN.bin [TEST.bin]\n", argv[0]);
    return 2;
  }
  sol::model::Model* model = sol::model::Model::Create(argv[1], 2);
  if (model == nullptr) return 2;
  const std::string params = argv[2];
  if (!params.empty()) {
    for (const std::string& pair : sol::split(params, ';')) {
      const std::vector<std::string> name_value = sol::split(pair, '=');
      if (name_value.size() != 2) return 2;
      model->SetParameter(sol::strip(name_value[0]), sol::strip(name_value[1]));
    }
  }
  // Enough buffers for the whole file, so that the reader never waits for one back.
  auto* train = new sol::pario::DataIter(256, 1 << 12);
  if (train->AddReader(argv[3], "bin", 1) != sol::Status_OK) return 1;
  ReplayIter replay(read_all(train));

  const double start = sol::get_current_time();
  const float train_error = model->Train(replay);
  const double seconds = sol::get_current_time() - start;
  printf("seconds %.6f train_accuracy %.6f", seconds, 1.f - train_error);
  if (argc > 4) {
    sol::pario::DataIter test(256, 2);
    if (test.AddReader(argv[4], "bin", 1) != sol::Status_OK) return 1;
    printf(" test_accuracy %.6f", 1.f - model->Test(test, nullptr));
  }
  printf("\n");
  fflush(stdout);
  _exit(0);   // the batches belong to `train`, whose reader is still parked: skip teardown
}
