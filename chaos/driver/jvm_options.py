"""The JVM options and class path of a driver's application: its own, and its executors'."""

from __future__ import annotations

import os

from chaos.machine.spark import APP_HEAP_START, scratch_option


def quick_heap(config: dict) -> str:
    """With the quick JVM flags, a driver's or an executor's heap starts at ``APP_HEAP_START`` instead of
    their 16 MiB (chaos.machine.spark.QUICK_JVM_OPTIONS): both hold 60-100 MiB once a query runs, and growing to
    that from 16 MiB took a dozen full collections per JVM, ~1 CPU-s each."""
    return APP_HEAP_START if config.get("java_options") else ""


def driver_java_options(config: dict) -> str:
    """A deep stack for Spark's plan recursion, the harness's JVM flags and temporary directory, its class
    archive if built."""
    options = ["-Xss16m", config.get("java_options") or "", quick_heap(config), scratch_option(config.get("tmp_dir"))]
    if config.get("class_archive"):
        options.append(f"-XX:SharedArchiveFile={config['class_archive']}")
    return " ".join(o for o in options if o)


def executor_java_options(config: dict) -> str:
    """The harness's JVM flags and temporary directory, and the executors' class archive, if built."""
    options = [config.get("java_options") or "", quick_heap(config), scratch_option(config.get("tmp_dir"))]
    if config.get("executor_archive"):
        options.append(f"-XX:SharedArchiveFile={config['executor_archive']}")
    return " ".join(o for o in options if o)


EXECUTOR_CLASS_PATH = "spark.executor.extraClassPath"
CLASS_PATH_KEYS = ("spark.driver.extraClassPath", EXECUTOR_CLASS_PATH)


def class_path_first(class_path: str, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the harness's class path (chaos/machine/jvm/unsigned.py) ahead of any extra class path it sets."""
    if not class_path:
        return conf
    merged = dict(conf)
    for key in CLASS_PATH_KEYS:
        merged[key] = os.pathsep.join(p for p in (class_path, conf.get(key, "")) if p)
    return merged
