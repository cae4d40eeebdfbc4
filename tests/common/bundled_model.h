// A test suite sharing one CPU backend and the bundled model (models/deepseek-v4-tiny-en) across
// its tests: loaded once per suite, released after it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::testing_model {

inline const std::string kBundledModel =
    std::string(DEEPINFER_SOURCE_DIR) + "/models/deepseek-v4-tiny-en";

class BundledModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = make_cpu_backend().release();
    model_ = deepseek_v4::Model::load(kBundledModel, *backend_).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete backend_;
    model_ = nullptr;
    backend_ = nullptr;
  }
  static inline Backend* backend_ = nullptr;
  static inline deepseek_v4::Model* model_ = nullptr;
};

}  // namespace deepinfer::testing_model
