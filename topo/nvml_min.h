/* nvml_min: the few NVML types and entry points topo/ uses, written from NVIDIA's documented
 * ABI so that neither nvml.h nor the driver is needed to build. Symbols are named with their
 * explicit versions (nvml.h #defines the plain names to these): the struct layouts below are
 * those of the versions named. Shared by topo_nvml.c, telemetry's tel_nvml.c and the test-only
 * NVML library. */
#ifndef FABENCH_NVML_MIN_H
#define FABENCH_NVML_MIN_H

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_UNKNOWN = 999
};

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;

/* nvmlPciInfo_t as used by nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2. */
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;    /* device id << 16 | vendor id */
  unsigned int pciSubSystemId;
  char busId[32];              /* "00000000:17:00.0" */
} nvmlPciInfo_t;

typedef struct {
  unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

#define NVML_NVLINK_MAX_LINKS 18

/* nvmlDeviceGetUtilizationRates: percent of the last sample period (1/6 s to 1 s) */
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;

/* nvmlDeviceGetFieldValues: NVLink data counters, cumulative KiB over the GPU's links */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
typedef union {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
} nvmlValue_t;
typedef struct {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType; /* 0 double, 1 unsigned int, 2 unsigned long, 3 unsigned long long, 4 signed long long */
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

/* Function pointer types, one per symbol looked up with dlsym. */
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char *(*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t, nvmlPciInfo_t *);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkVersion_fn)(nvmlDevice_t, unsigned int, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo_v2_fn)(nvmlDevice_t, unsigned int,
                                                                nvmlPciInfo_t *);
/* MIG: the mode (current, pending; 1 enabled), the instances as device handles of their own */
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlDevice_t *);
typedef nvmlReturn_t (*nvmlDeviceGetGpuInstanceId_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetComputeInstanceId_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetMaxPcieLinkGeneration_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetMaxPcieLinkWidth_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t *);

#endif
