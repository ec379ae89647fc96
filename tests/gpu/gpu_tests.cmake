# The GPU suite: every test here carries the CTest label `gpu` (scripts/gpu/test.sh runs them with
# `ctest -L gpu`; the CPU suite leaves them out with -LE gpu). Included by tests/CMakeLists.txt.
#
# Where no CUDA GPU is usable each test is SKIPPED with the reason: a GoogleTest case calls
# GTEST_SKIP() (each case is a CTest entry of its own, so SKIP_REGULAR_EXPRESSION only ever sees that
# one case's skip), and a program runs through acc_gpu_run, which exits 77 (SKIP_RETURN_CODE).
# Both decide with gpu/gpu_check.h, from the library's acc_build_info(): where an NVIDIA GPU is
# present but the library cannot use it, the tests FAIL instead of skipping. The Python steps exit
# 77 when their package (torch 2.x, safetensors, tensorboard) is missing, which skips the test too.
# -DACC_BUILD_GPU_TESTS=OFF leaves the suite out of the build.
option(ACC_BUILD_GPU_TESTS "Build the GPU tests (CTest label gpu; skipped without a CUDA GPU)" ON)
if(ACC_BUILD_GPU_TESTS)
  include(GoogleTest)
  set(ACC_GPU_DIR ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
  set(ACC_GPU_WORK ${CMAKE_CURRENT_BINARY_DIR}/gpu_work)  # each test's files, kept for inspection
  set(ACC_GPU_ENV "ACC_PYTHON_TORCH=${ACC_PYTHON_TORCH}" "ACC_GPU_TEST_SCRIPTS=${ACC_GPU_DIR}"
    "ACC_GPU_TEST_WORK=${ACC_GPU_WORK}")

  # acc_gpu_run PROGRAM ARGS...: PROGRAM when a GPU is usable, else exit 77.
  add_executable(acc_gpu_run ${ACC_GPU_DIR}/acc_gpu_run.cpp)
  target_link_libraries(acc_gpu_run PRIVATE accelerate nlohmann_json::nlohmann_json)

  # GoogleTest cases through the C API only, and cases of the C++ core; one CTest entry per case
  # (gpu.<Suite>.<Name>), found in the sources by gtest_add_tests.
  set(ACC_GPU_CAPI_SOURCES ${ACC_GPU_DIR}/capi_precision.cpp ${ACC_GPU_DIR}/capi_memory.cpp
    ${ACC_GPU_DIR}/capi_python.cpp ${ACC_GPU_DIR}/capi_profile.cpp ${ACC_GPU_DIR}/capi_lora.cpp)
  add_executable(acc_gpu_capi_tests ${ACC_GPU_CAPI_SOURCES})
  acc_glue_program(acc_gpu_capi_tests)
  target_link_libraries(acc_gpu_capi_tests PRIVATE accelerate GTest::gtest_main nlohmann_json::nlohmann_json)
  gtest_add_tests(TARGET acc_gpu_capi_tests SOURCES ${ACC_GPU_CAPI_SOURCES} TEST_PREFIX "gpu."
    TEST_LIST acc_gpu_capi_cases)

  set(ACC_GPU_CPP_SOURCES ${ACC_GPU_DIR}/cpp_gpu.cpp)
  add_executable(acc_gpu_cpp_tests ${ACC_GPU_CPP_SOURCES})
  target_link_libraries(acc_gpu_cpp_tests PRIVATE accelerate GTest::gtest_main)
  acc_use_core(acc_gpu_cpp_tests)
  gtest_add_tests(TARGET acc_gpu_cpp_tests SOURCES ${ACC_GPU_CPP_SOURCES} TEST_PREFIX "gpu."
    TEST_LIST acc_gpu_cpp_cases)

  # GoogleTest prints "[  SKIPPED ] <test>" only for a case that skipped (a failed one is FAILED).
  set_tests_properties(${acc_gpu_capi_cases} ${acc_gpu_cpp_cases} PROPERTIES
    LABELS gpu TIMEOUT 300 RUN_SERIAL TRUE SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
    ENVIRONMENT "${ACC_GPU_ENV}")

  # The Fashion-MNIST main job (3 epochs, the example's defaults) on the GPU reaches 88% test accuracy.
  if(ACC_HAVE_FASHION_MNIST AND TARGET fashion_mnist)
    add_test(NAME gpu.fashion_mnist_main_job_reaches_88_percent
      COMMAND acc_gpu_run $<TARGET_FILE:fashion_mnist> --min-accuracy 88 --data ${ACC_FASHION_MNIST_DIR}
              --save "" --project-dir ${ACC_GPU_WORK}/fashion_mnist_project)
    # The example names its device ("training on 1 process(es), cuda:0: ..."): never the CPU here.
    set_tests_properties(gpu.fashion_mnist_main_job_reaches_88_percent PROPERTIES
      LABELS gpu TIMEOUT 900 RUN_SERIAL TRUE SKIP_RETURN_CODE 77
      FAIL_REGULAR_EXPRESSION "training on [0-9]+ process\\(es\\), cpu")
  else()
    message(STATUS "accelerate: no Fashion-MNIST in ${ACC_FASHION_MNIST_DIR} (or no examples): "
      "the GPU main-job test is not added")
  endif()

  # The built-in optimizers on CUDA against PyTorch's on CUDA, bit for bit: there Python steps Adam
  # with its foreach ops, whose rounding differs from its one-tensor rule (optim/python_rules.h),
  # and the fixture's fused cases (PyTorch >= 2.4) run its CUDA fused kernels (optim/fused_rules.h).
  add_test(NAME gpu.optimizers_equal_pytorchs_on_cuda
    COMMAND acc_gpu_run bash ${ACC_GPU_DIR}/fixture_on_cuda.sh ${ACC_PYTHON_TORCH}
            ${CMAKE_CURRENT_SOURCE_DIR}/data/export_optimizer_cases.py ${ACC_GPU_WORK}/optimizer_cases
            $<TARGET_FILE:acc_capi_tests> Optimizers.BuiltInRulesEqualPyTorchsBitForBit)
  # AveragedModel's averages kept on CUDA, where PyTorch 2.x averages SWA with its foreach lerp.
  add_test(NAME gpu.averaged_models_equal_pytorchs_on_cuda
    COMMAND acc_gpu_run bash ${ACC_GPU_DIR}/fixture_on_cuda.sh ${ACC_PYTHON_TORCH}
            ${CMAKE_CURRENT_SOURCE_DIR}/data/export_averaging_cases.py ${ACC_GPU_WORK}/averaging_cases
            $<TARGET_FILE:acc_capi_tests> AveragedModels.AverageAsPyTorchsAveragedModelBitForBit)
  set_tests_properties(gpu.optimizers_equal_pytorchs_on_cuda gpu.averaged_models_equal_pytorchs_on_cuda PROPERTIES
    LABELS gpu TIMEOUT 300 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)

  # tests/dist cases (a gtest filter) on 2 processes sharing the GPU over Gloo. ACC_TEST_USE_GPU=1
  # makes them assert that they run on CUDA.
  function(acc_gpu_dist_test name filter)
    add_test(NAME ${name}
      COMMAND acc_gpu_run $<TARGET_FILE:accelerate-launch> --num_processes 2 --kill_timeout 2
              $<TARGET_FILE:acc_dist_tests> --gtest_filter=${filter})
    set_tests_properties(${name} PROPERTIES
      LABELS gpu TIMEOUT 300 RUN_SERIAL TRUE SKIP_RETURN_CODE 77
      ENVIRONMENT "ACC_TEST_BACKEND=gloo;ACC_TEST_USE_GPU=1;ACC_TEST_DATA=${ACC_TEST_DATA}")
  endfunction()
  # DDP on 2 processes against one process on the whole batch.
  acc_gpu_dist_test(gpu.dist_ddp_2_processes_share_the_gpu_over_gloo "Ddp.*")
  # Sharded data parallelism with CUDA tensors: every stage against DDP, accumulation, clipping,
  # bf16, CPU offload, TorchScript units, checkpoints.
  acc_gpu_dist_test(gpu.dist_sharded_2_processes_share_the_gpu_over_gloo "Sharded.*")
  # LOMO's per-parameter averaging inside backward on the autograd engine's CUDA thread.
  acc_gpu_dist_test(gpu.dist_lomo_2_processes_share_the_gpu_over_gloo "DdpLomo.*")
endif()
