/*
 * Stand-in NVML for tests: exports the NVML C functions that pynvml (nvidia-ml-py) calls,
 * answering from a scenario file so the REAL pynvml ctypes wrappers run without a GPU.
 *
 * The scenario path comes from $OBSCTL_NVML_STUB_SCENARIO, read at nvmlInit and on
 * nvmlStub_Reload(). Format (one directive per line, '#' starts a comment):
 *
 *   driver 550.54.15          system driver version
 *   init_error 9              nvmlInit returns this code (9 driver not loaded, 18 mismatch)
 *   gpu                       start a new physical GPU (index = order of appearance)
 *   mig_device                start a MIG device of the last gpu (index order = MIG index)
 *   name TEXT... | uuid TEXT | bus TEXT     strings of the current device
 *   <field> [v1 v2 ...] [err=N] [delay_ms=N]
 *   event GPU_INDEX XID       an XID critical event queued for nvmlEventSetWait
 *   vary 1                    values move on every read, as a busy GPU's do (benchmarks): utilization,
 *                             memory used, power, temperatures and the SM clock alternate by one unit,
 *                             energy grows by 1000 mJ
 *
 * Fields (values in NVML's own units): util gpu% mem% | mem total used free reserved |
 * mem_v2 (err only) | power mW | power_limit mW | energy mJ | temp C | mem_temp C |
 * clock_sm MHz | clock_mem MHz | reasons bitmask | ecc corrected uncorrected |
 * remap corr unc pending failed | replay n | nvlink nlinks active_mask | mig current pending |
 * mig_max n | gi id | pcie_tx KB/s | pcie_rx KB/s | procs pid gi pid gi ... | events (err) |
 * lost (err only: every call on the device returns it) | attrs slices memMB |
 * nvl_crc_flit n | nvl_crc_data n | nvl_replay n | nvl_recovery n (NVLink error counts summed over the
 * GPU's links, answered as the field values NVML_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_
 * ERROR_COUNT_TOTAL = 38, 45, 52, 59; unsigned long long).
 * A field never mentioned answers NVML_ERROR_NOT_SUPPORTED (3).
 * Error codes are NVML's (nvml.h / pynvml): 3 not supported, 4 no permission,
 * 9 driver not loaded, 15 GPU is lost, 18 lib/RM version mismatch, 999 unknown.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
enum { OK = 0, E_UNINIT = 1, E_INVALID = 2, E_NOTSUP = 3, E_INSUFF = 7, E_TIMEOUT = 10,
       E_NOTFOUND = 6, E_UNKNOWN = 999 };

enum { F_UTIL, F_MEM, F_MEM_V2, F_POWER, F_POWER_LIMIT, F_ENERGY, F_TEMP, F_MEM_TEMP, F_CLOCK_SM,
       F_CLOCK_MEM, F_REASONS, F_ECC, F_REMAP, F_REPLAY, F_NVLINK, F_MIG, F_MIG_MAX, F_GI,
       F_PCIE_TX, F_PCIE_RX, F_PROCS, F_EVENTS, F_LOST, F_ATTRS, F_NVL_CRC_FLIT, F_NVL_CRC_DATA,
       F_NVL_REPLAY, F_NVL_RECOVERY, NF };
static const char *FIELD_NAMES[NF] = {
    "util", "mem", "mem_v2", "power", "power_limit", "energy", "temp", "mem_temp", "clock_sm",
    "clock_mem", "reasons", "ecc", "remap", "replay", "nvlink", "mig", "mig_max", "gi",
    "pcie_tx", "pcie_rx", "procs", "events", "lost", "attrs", "nvl_crc_flit", "nvl_crc_data",
    "nvl_replay", "nvl_recovery"};

#define MAXV 64
typedef struct { int set, err, delay_ms, nv; unsigned long long v[MAXV]; } field_t;

#define MAXDEV 1024
#define MAXMIG 8
typedef struct dev {
    int index, is_mig, parent, n_mig, mig[MAXMIG];
    char name[96], uuid[96], bus[32];
    field_t f[NF];
    unsigned long long calls;
    unsigned long long registered;  /* event types registered for this device */
} sdev_t;

typedef struct { int dev; unsigned long long xid; int consumed; } event_t;
#define MAXEV 256

static sdev_t devs[MAXDEV];
static int ndev, nphys, phys[MAXDEV];
static event_t events[MAXEV];
static int nevents;
static char driver[80] = "550.54.15";
static int init_error, initialized, vary;
static unsigned long long total_calls;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int load(void) {
    const char *path = getenv("OBSCTL_NVML_STUB_SCENARIO");
    FILE *fp = path ? fopen(path, "r") : NULL;
    if (!fp) return -1;
    pthread_mutex_lock(&mu);
    memset(devs, 0, sizeof devs);
    ndev = nphys = nevents = init_error = vary = 0;
    strcpy(driver, "550.54.15");
    sdev_t *cur = NULL;
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        line[strcspn(line, "\r\n")] = 0;
        char *key = strtok(line, " \t");
        if (!key) continue;
        char *rest = strtok(NULL, "");
        while (rest && (*rest == ' ' || *rest == '\t')) rest++;
        if (!strcmp(key, "gpu") || !strcmp(key, "mig_device")) {
            if (ndev >= MAXDEV) break;
            cur = &devs[ndev];
            cur->index = ndev;
            if (!strcmp(key, "gpu")) {
                cur->is_mig = 0;
                phys[nphys++] = ndev;
            } else if (nphys > 0) {
                sdev_t *p = &devs[phys[nphys - 1]];
                cur->is_mig = 1;
                cur->parent = p->index;
                if (p->n_mig < MAXMIG) p->mig[p->n_mig++] = ndev;
            }
            ndev++;
            continue;
        }
        if (!strcmp(key, "driver") && rest) { snprintf(driver, sizeof driver, "%s", rest); continue; }
        if (!strcmp(key, "init_error") && rest) { init_error = atoi(rest); continue; }
        if (!strcmp(key, "vary") && rest) { vary = atoi(rest); continue; }
        if (!strcmp(key, "event") && rest && nevents < MAXEV) {
            int g = 0; unsigned long long x = 0;
            if (sscanf(rest, "%d %llu", &g, &x) == 2 && g < nphys) {
                events[nevents].dev = phys[g]; events[nevents].xid = x; events[nevents].consumed = 0;
                nevents++;
            }
            continue;
        }
        if (!cur) continue;
        if (!strcmp(key, "name") && rest) { snprintf(cur->name, sizeof cur->name, "%s", rest); continue; }
        if (!strcmp(key, "uuid") && rest) { snprintf(cur->uuid, sizeof cur->uuid, "%s", rest); continue; }
        if (!strcmp(key, "bus") && rest) { snprintf(cur->bus, sizeof cur->bus, "%s", rest); continue; }
        for (int i = 0; i < NF; i++) {
            if (strcmp(key, FIELD_NAMES[i])) continue;
            field_t *f = &cur->f[i];
            f->set = 1;
            char *tok = rest ? strtok(rest, " \t") : NULL;
            for (; tok; tok = strtok(NULL, " \t")) {
                if (!strncmp(tok, "err=", 4)) f->err = atoi(tok + 4);
                else if (!strncmp(tok, "delay_ms=", 9)) f->delay_ms = atoi(tok + 9);
                else if (f->nv < MAXV) f->v[f->nv++] = strtoull(tok, NULL, 0);
            }
        }
    }
    fclose(fp);
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Common prologue of a device call: initialised? valid handle? device lost? field scripted? */
static nvmlReturn_t getf(sdev_t *d, int fi, field_t **out) {
    if (!initialized) return E_UNINIT;
    if (!d || d < devs || d >= devs + ndev) return E_INVALID;
    __atomic_add_fetch(&d->calls, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&total_calls, 1, __ATOMIC_RELAXED);
    if (d->f[F_LOST].set) return d->f[F_LOST].err ? d->f[F_LOST].err : 15;
    field_t *f = &d->f[fi];
    if (f->delay_ms) sleep_ms(f->delay_ms);
    if (!f->set) return E_NOTSUP;
    *out = f;
    if (vary && !f->err) {  /* "vary 1": the next read answers a moved value */
        switch (fi) {
        case F_UTIL: f->v[0] ^= 1; f->v[1] ^= 1; break;
        case F_MEM: f->v[1] ^= 1ULL << 20; break;
        case F_POWER: case F_TEMP: case F_MEM_TEMP: case F_CLOCK_SM: f->v[0] ^= 1; break;
        case F_ENERGY: f->v[0] += 1000; break;
        default: break;
        }
    }
    return f->err;
}
#define GET(fi) field_t *f = NULL; nvmlReturn_t rc_ = getf(d, fi, &f); if (rc_) return rc_;

/* ---- test-only controls ---- */
int nvmlStub_Reload(void) { return load(); }
unsigned long long nvmlStub_CallCount(void) { return total_calls; }
unsigned long long nvmlStub_DeviceCallCount(int i) { return (i >= 0 && i < nphys) ? devs[phys[i]].calls : 0; }
int nvmlStub_PendingEvents(void) {
    int n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nevents; i++) n += !events[i].consumed;
    pthread_mutex_unlock(&mu);
    return n;
}

/* ---- init / system ---- */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (load() != 0) return E_UNKNOWN;
    if (init_error) return init_error;
    initialized++;
    return OK;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) return E_UNINIT;
    initialized--;
    return OK;
}
const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len) {
    if (!initialized) return E_UNINIT;
    if (strlen(driver) + 1 > len) return E_INSUFF;
    strcpy(buf, driver);
    return OK;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialized) return E_UNINIT;
    *count = (unsigned)nphys;
    return OK;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, sdev_t **h) {
    if (!initialized) return E_UNINIT;
    if (i >= (unsigned)nphys) return E_INVALID;
    sdev_t *d = &devs[phys[i]];
    if (d->f[F_LOST].set) return d->f[F_LOST].err ? d->f[F_LOST].err : 15;
    *h = d;
    return OK;
}

/* ---- identity ---- */
static nvmlReturn_t copy_str(sdev_t *d, const char *s, char *buf, unsigned len) {
    if (!initialized) return E_UNINIT;
    if (!d || d < devs || d >= devs + ndev) return E_INVALID;
    if (d->f[F_LOST].set) return d->f[F_LOST].err ? d->f[F_LOST].err : 15;
    if (strlen(s) + 1 > len) return E_INSUFF;
    strcpy(buf, s);
    return OK;
}
nvmlReturn_t nvmlDeviceGetUUID(sdev_t *d, char *buf, unsigned len) { return copy_str(d, d ? d->uuid : "", buf, len); }
nvmlReturn_t nvmlDeviceGetName(sdev_t *d, char *buf, unsigned len) { return copy_str(d, d ? d->name : "", buf, len); }

typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;
nvmlReturn_t nvmlDeviceGetPciInfo_v3(sdev_t *d, pci_t *p) {
    nvmlReturn_t r = copy_str(d, d ? d->bus : "", p->busId, sizeof p->busId);
    if (r) return r;
    unsigned dom = 0, bus = 0, dv = 0;
    sscanf(d->bus, "%x:%x:%x", &dom, &bus, &dv);
    p->domain = dom; p->bus = bus; p->device = dv;
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.0", dom & 0xffff, bus, dv);
    return OK;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(sdev_t *d, pci_t *p) { return nvmlDeviceGetPciInfo_v3(d, p); }

/* ---- telemetry ---- */
typedef struct { unsigned gpu, memory; } util_t;
nvmlReturn_t nvmlDeviceGetUtilizationRates(sdev_t *d, util_t *u) {
    GET(F_UTIL); u->gpu = (unsigned)f->v[0]; u->memory = (unsigned)f->v[1]; return OK;
}
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } mem2_t;
nvmlReturn_t nvmlDeviceGetMemoryInfo(sdev_t *d, mem_t *m) {
    GET(F_MEM); m->total = f->v[0]; m->used = f->v[1]; m->free = f->v[2]; return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(sdev_t *d, mem2_t *m) {
    field_t *f2 = &d->f[F_MEM_V2];
    if (d && d >= devs && d < devs + ndev && f2->set && f2->err) { getf(d, F_MEM_V2, &f2); return f2->err; }
    if (m->version != 0x02000028) return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    GET(F_MEM);
    m->total = f->v[0]; m->used = f->v[1]; m->free = f->v[2]; m->reserved = f->nv > 3 ? f->v[3] : 0;
    return OK;
}
#define UINT_GETTER(fn, fi) \
    nvmlReturn_t fn(sdev_t *d, unsigned *out) { GET(fi); *out = (unsigned)f->v[0]; return OK; }
UINT_GETTER(nvmlDeviceGetPowerUsage, F_POWER)
UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, F_POWER_LIMIT)
UINT_GETTER(nvmlDeviceGetPcieReplayCounter, F_REPLAY)
UINT_GETTER(nvmlDeviceGetGpuInstanceId, F_GI)
UINT_GETTER(nvmlDeviceGetMaxMigDeviceCount, F_MIG_MAX)

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(sdev_t *d, unsigned long long *mj) {
    GET(F_ENERGY); *mj = f->v[0]; return OK;
}
nvmlReturn_t nvmlDeviceGetTemperature(sdev_t *d, int sensor, unsigned *t) {
    if (sensor != 0) return E_INVALID;
    GET(F_TEMP); *t = (unsigned)f->v[0]; return OK;
}
nvmlReturn_t nvmlDeviceGetClockInfo(sdev_t *d, int type, unsigned *mhz) {
    /* NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 */
    if (type == 1) { GET(F_CLOCK_SM); *mhz = (unsigned)f->v[0]; return OK; }
    if (type == 2) { GET(F_CLOCK_MEM); *mhz = (unsigned)f->v[0]; return OK; }
    return E_NOTSUP;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(sdev_t *d, unsigned long long *r) {
    GET(F_REASONS); *r = f->v[0]; return OK;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(sdev_t *d, unsigned long long *r) {
    return nvmlDeviceGetCurrentClocksEventReasons(d, r);
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(sdev_t *d, int errType, int counterType, unsigned long long *n) {
    (void)counterType;
    GET(F_ECC);
    if (errType < 0 || errType > 1) return E_INVALID;
    *n = f->v[errType];
    return OK;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(sdev_t *d, unsigned *c, unsigned *u, unsigned *p, unsigned *fl) {
    GET(F_REMAP);
    *c = (unsigned)f->v[0]; *u = (unsigned)f->v[1]; *p = (unsigned)f->v[2]; *fl = (unsigned)f->v[3];
    return OK;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(sdev_t *d, unsigned link, unsigned *active) {
    GET(F_NVLINK);
    if (link >= f->v[0]) return E_INVALID;
    *active = (unsigned)((f->v[1] >> link) & 1ULL);
    return OK;
}
nvmlReturn_t nvmlDeviceGetPcieThroughput(sdev_t *d, int counter, unsigned *kbs) {
    /* real NVML samples for ~20 ms per direction */
    if (counter == 0) { GET(F_PCIE_TX); *kbs = (unsigned)f->v[0]; return OK; }
    if (counter == 1) { GET(F_PCIE_RX); *kbs = (unsigned)f->v[0]; return OK; }
    return E_INVALID;
}

typedef union { double d; unsigned ui; unsigned long ul; unsigned long long ull; long long sll; int si; unsigned short us; } value_t;
typedef struct { unsigned fieldId, scopeId; long long timestamp, latencyUsec; int valueType; nvmlReturn_t nvmlReturn; value_t value; } fv_t;
nvmlReturn_t nvmlDeviceGetFieldValues(sdev_t *d, int n, fv_t *vals) {
    if (!initialized) return E_UNINIT;
    if (!d || d < devs || d >= devs + ndev) return E_INVALID;
    if (d->f[F_LOST].set) return d->f[F_LOST].err ? d->f[F_LOST].err : 15;
    for (int i = 0; i < n; i++) {
        field_t *f = NULL;
        if (vals[i].fieldId == 82) { /* NVML_FI_DEV_MEMORY_TEMP */
            vals[i].nvmlReturn = getf(d, F_MEM_TEMP, &f);
            if (!vals[i].nvmlReturn) { vals[i].valueType = 1; vals[i].value.ull = 0; vals[i].value.ui = (unsigned)f->v[0]; }
        } else if (vals[i].fieldId == 83) { /* NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION */
            vals[i].nvmlReturn = getf(d, F_ENERGY, &f);
            if (!vals[i].nvmlReturn) { vals[i].valueType = 3; vals[i].value.ull = f->v[0]; }
        } else if (vals[i].fieldId == 38 || vals[i].fieldId == 45 || vals[i].fieldId == 52 || vals[i].fieldId == 59) {
            int fi = vals[i].fieldId == 38 ? F_NVL_CRC_FLIT : vals[i].fieldId == 45 ? F_NVL_CRC_DATA
                   : vals[i].fieldId == 52 ? F_NVL_REPLAY : F_NVL_RECOVERY;
            vals[i].nvmlReturn = getf(d, fi, &f);
            if (!vals[i].nvmlReturn) { vals[i].valueType = 3; vals[i].value.ull = f->v[0]; }
        } else {
            vals[i].nvmlReturn = E_NOTSUP;
        }
    }
    return OK;
}

/* ---- MIG ---- */
nvmlReturn_t nvmlDeviceGetMigMode(sdev_t *d, unsigned *cur, unsigned *pend) {
    GET(F_MIG); *cur = (unsigned)f->v[0]; *pend = (unsigned)(f->nv > 1 ? f->v[1] : f->v[0]); return OK;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(sdev_t *d, unsigned idx, sdev_t **h) {
    field_t *f = NULL;
    nvmlReturn_t r = getf(d, F_MIG, &f);
    if (r) return r;
    if (!f->v[0]) return E_INVALID;
    if (idx >= (unsigned)d->n_mig) return E_NOTFOUND;
    *h = &devs[d->mig[idx]];
    return OK;
}
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(sdev_t *d, unsigned *is) {
    if (!initialized) return E_UNINIT;
    *is = (unsigned)d->is_mig; return OK;
}
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(sdev_t *d, sdev_t **h) {
    if (!initialized) return E_UNINIT;
    if (!d->is_mig) return E_INVALID;
    *h = &devs[d->parent]; return OK;
}
typedef struct { unsigned mp, ce, dec, enc, jpg, ofa, gis, cis; unsigned long long memMB; } attrs_t;
nvmlReturn_t nvmlDeviceGetAttributes_v2(sdev_t *d, attrs_t *a) {
    GET(F_ATTRS);
    memset(a, 0, sizeof *a);
    a->gis = (unsigned)f->v[0]; a->memMB = f->v[1];
    return OK;
}

/* ---- processes ---- */
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gi, ci; } proc_t;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(sdev_t *d, unsigned *count, proc_t *out) {
    GET(F_PROCS);
    unsigned n = (unsigned)(f->nv / 2);
    if (n == 0) { *count = 0; return OK; }
    if (!out || *count < n) { *count = n; return E_INSUFF; }
    for (unsigned i = 0; i < n; i++) {
        out[i].pid = (unsigned)f->v[2 * i]; out[i].gi = (unsigned)f->v[2 * i + 1];
        out[i].usedGpuMemory = 1ULL << 30; out[i].ci = 0;
    }
    *count = n;
    return OK;
}

/* ---- events ---- */
typedef struct { int used; } evset_t;
static evset_t evsets[16];
typedef struct { sdev_t *device; unsigned long long eventType, eventData; unsigned gi, ci; } evdata_t;

nvmlReturn_t nvmlEventSetCreate(evset_t **set) {
    if (!initialized) return E_UNINIT;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 16; i++) if (!evsets[i].used) { evsets[i].used = 1; *set = &evsets[i]; pthread_mutex_unlock(&mu); return OK; }
    pthread_mutex_unlock(&mu);
    return E_UNKNOWN;
}
nvmlReturn_t nvmlEventSetFree(evset_t *set) {
    pthread_mutex_lock(&mu);
    set->used = 0;
    pthread_mutex_unlock(&mu);
    return OK;
}
nvmlReturn_t nvmlDeviceRegisterEvents(sdev_t *d, unsigned long long types, evset_t *set) {
    (void)set;
    if (!initialized) return E_UNINIT;
    if (!d || d < devs || d >= devs + ndev) return E_INVALID;
    if (d->f[F_LOST].set) return d->f[F_LOST].err ? d->f[F_LOST].err : 15;
    if (d->f[F_EVENTS].set && d->f[F_EVENTS].err) return d->f[F_EVENTS].err;
    d->registered |= types;
    return OK;
}
nvmlReturn_t nvmlEventSetWait_v2(evset_t *set, evdata_t *data, unsigned timeout_ms) {
    (void)set;
    for (unsigned waited = 0;; waited++) {
        if (!initialized) return E_UNINIT;
        pthread_mutex_lock(&mu);
        for (int i = 0; i < nevents; i++) {
            event_t *e = &events[i];
            if (e->consumed || !(devs[e->dev].registered & 0x8ULL)) continue;
            e->consumed = 1;
            data->device = &devs[e->dev]; data->eventType = 0x8ULL; data->eventData = e->xid;
            data->gi = 0xFFFFFFFFu; data->ci = 0xFFFFFFFFu;
            pthread_mutex_unlock(&mu);
            return OK;
        }
        pthread_mutex_unlock(&mu);
        if (waited >= timeout_ms) return E_TIMEOUT;
        sleep_ms(1);
    }
}
nvmlReturn_t nvmlEventSetWait(evset_t *set, evdata_t *data, unsigned timeout_ms) {
    return nvmlEventSetWait_v2(set, data, timeout_ms);
}
