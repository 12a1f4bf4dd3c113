/*
 * Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements.  See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License.  You may obtain a copy of the License at
 *
 *    http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

// For sql/core/src/test/scala/org/apache/spark/sql/streaming/. Run here against Spark 4.2.0's published test
// jars (docs/findings/pom.xml).
// Each test fails today at its last CheckNewAnswer (no batch runs after the restart, so nothing new
// reaches the sink) and passes once a restarted query runs the batch without data that its last
// committed batch asked for.

package org.apache.spark.sql.streaming

import org.scalatest.concurrent.Eventually.eventually
import org.scalatest.concurrent.PatienceConfiguration.Timeout

// Before the streaming runtime classes moved: org.apache.spark.sql.execution.streaming.MemoryStream
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider
import org.apache.spark.sql.functions.{count, timestamp_seconds, window}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.streaming.util.StreamManualClock

class ProcessingTimersRestartSuite extends StreamTest {
  import testImplicits._

  private val trigger = Trigger.ProcessingTime("1 second")

  /** Passes once the trigger at the clock's current time has finished, whether it ran a batch. */
  private def triggerDone(clock: StreamManualClock): AssertOnQuery = AssertOnQuery { _ =>
    eventually(Timeout(streamingTimeout)) {
      assert(clock.isStreamWaitingAt(clock.getTimeMillis()))
    }
    true
  }

  test("transformWithState: a processing-time timer due at restart fires without new input") {
    withSQLConf(
      SQLConf.STATE_STORE_PROVIDER_CLASS.key -> classOf[RocksDBStateStoreProvider].getName) {
      val clock = new StreamManualClock
      val input = MemoryStream[String]
      // From TransformWithStateSuite: key "a" counts 1 and registers a timer 5 s later;
      // the timer emits ("a", "-1").
      val result = input.toDS()
        .groupByKey(x => x)
        .transformWithState(new RunningCountStatefulProcessorWithProcTimeTimer(),
          TimeMode.ProcessingTime(), OutputMode.Update())

      testStream(result, OutputMode.Update())(
        StartStream(trigger, clock),
        AddData(input, "a"),
        AdvanceManualClock(1 * 1000), // batch 0 at 1 s: timer for "a" at 6 s
        CheckNewAnswer(("a", "1")),
        StopStream, // batch 0 is the last committed batch
        StartStream(trigger, clock),
        AdvanceManualClock(10 * 1000), // 11 s: the timer is due
        triggerDone(clock),
        CheckNewAnswer(("a", "-1"))) // today: no batch, nothing new
    }
  }

  test("flatMapGroupsWithState: a processing-time timeout due at restart fires without new input") {
    val clock = new StreamManualClock
    val input = MemoryStream[String]
    val stateFunc = (key: String, values: Iterator[String], state: GroupState[Long]) => {
      if (state.hasTimedOut) {
        state.remove()
        Iterator((key, "-1"))
      } else {
        val count = state.getOption.getOrElse(0L) + values.size
        state.update(count)
        state.setTimeoutDuration("5 seconds")
        Iterator((key, count.toString))
      }
    }
    val result = input.toDS()
      .groupByKey(x => x)
      .flatMapGroupsWithState(OutputMode.Update(), GroupStateTimeout.ProcessingTimeTimeout())(
        stateFunc)

    testStream(result, OutputMode.Update())(
      StartStream(trigger, clock),
      AddData(input, "a"),
      AdvanceManualClock(1 * 1000), // batch 0 at 1 s: "a" times out at 6 s
      CheckNewAnswer(("a", "1")),
      StopStream,
      StartStream(trigger, clock),
      AdvanceManualClock(10 * 1000), // 11 s: the timeout is due
      triggerDone(clock),
      CheckNewAnswer(("a", "-1"))) // today: no batch, nothing new
  }

  test("append-mode window aggregation: a window closed by the last batch's watermark is " +
    "emitted at restart without new input") {
    val clock = new StreamManualClock
    val input = MemoryStream[Int]
    val windowed = input.toDF()
      .withColumn("eventTime", timestamp_seconds($"value"))
      .withWatermark("eventTime", "10 seconds")
      .groupBy(window($"eventTime", "5 seconds").as("window"))
      .agg(count("*").as("count"))
      .select($"window".getField("start").cast("long").as[Long], $"count".as[Long])

    testStream(windowed)(
      StartStream(trigger, clock),
      AddData(input, 10, 11, 12, 25), // batch 0; the watermark after it is 15 s
      AdvanceManualClock(1 * 1000),
      CheckNewAnswer(), // [10 s, 15 s) is final, but only the next batch evicts it
      StopStream, // commits/0 records nextBatchWatermarkMs = 15000
      StartStream(trigger, clock),
      AdvanceManualClock(1 * 1000),
      triggerDone(clock),
      CheckNewAnswer((10, 3))) // today: no batch, nothing new
  }
}
