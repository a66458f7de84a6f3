# train-data's tests (datasets, loader, schedules, checkpoints, `fabench train`); included from
# tests/models/CMakeLists.txt with include(data.cmake OPTIONAL).
fabench_test(test_data_files SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_data_files.c
             LIBS fabench_models ZLIB::ZLIB TIMEOUT 60)
fabench_test(test_data_loader SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_data_loader.c
             LIBS fabench_models TIMEOUT 60)
fabench_test(test_train_lr SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_lr.c
             LIBS fabench_models TIMEOUT 30)
fabench_test(test_train_ckpt SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_ckpt.c
             LIBS fabench_models TIMEOUT 30)
fabench_test(test_train_hash SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_hash.c
             LIBS fabench_models TIMEOUT 30)
# `fabench train` end to end needs the oneDNN engine
if(FABENCH_HAVE_DNNL)
  fabench_test(test_train_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_cli.c
               LIBS fabench_models ZLIB::ZLIB TIMEOUT 300)
  # sweeps: the lists' product, its order and rows, --resume DIR, loader workers, refused lists
  fabench_test(test_train_sweep SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_sweep.c
               LIBS fabench_models fabench_results TIMEOUT 120)
  fabench_test(test_train_dp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_dp.c
               LIBS fabench_models fabench_collectives fabench_results TIMEOUT 900)
  # --save-format sharded: per-rank checkpoints resumed bit-identically, and refused sets
  fabench_test(test_train_shards SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_shards.c
               LIBS fabench_models TIMEOUT 120)
endif()
