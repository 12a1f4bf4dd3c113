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

// For sql/core/src/test/scala/org/apache/spark/sql/streaming/ (run here against Spark 4.2.0's published test
// jars: docs/findings/pom.xml), beside the recovery tests of FileStreamSinkSuite. It fails today (the re-run
// batch 0 is skipped by the file sink without running: commits/0 keeps watermark 0, and the late record would
// be counted: 11) and passes once a skipped re-run batch
// still advances the watermark as its first run did (10). The same steps as skipped_batch_watermark_repro.py.

package org.apache.spark.sql.streaming

import java.io.File

// Before the streaming runtime classes moved: org.apache.spark.sql.execution.streaming.MemoryStream
import org.apache.spark.sql.Row
import org.apache.spark.sql.execution.streaming.runtime.{MemoryStream, StreamingQueryWrapper}
import org.apache.spark.sql.functions.{count, timestamp_seconds, window}

class SkippedBatchWatermarkSuite extends StreamTest {
  import testImplicits._

  test("a batch the file sink skips on a replay advances the watermark as its first run did") {
    withTempDir { dir =>
      val checkpoint = new File(dir, "checkpoint")
      val out = new File(dir, "out")
      val input = MemoryStream[(Int, Long)] // (id, event time in seconds)

      def start(trigger: Trigger): StreamingQuery =
        input.toDF().toDF("id", "s")
          .withColumn("ts", timestamp_seconds($"s"))
          .withWatermark("ts", "10 seconds")
          .groupBy(window($"ts", "10 seconds")).agg(count("*").as("n"))
          .select($"window.start".cast("long").as("start"), $"n")
          .writeStream.format("parquet").outputMode("append").trigger(trigger)
          .option("checkpointLocation", checkpoint.getCanonicalPath)
          .start(out.getCanonicalPath)

      // Batch 0 alone: ten events in [0 s, 10 s) and one at 30 s; commits/0 says watermark 20 s.
      input.addData((0 until 10).map(i => (i, i.toLong)) :+ ((10, 30L)))
      val first = start(Trigger.Once())
      first.awaitTermination()

      // What a driver killed after the sink's _spark_metadata/0 and before commits/0 leaves.
      new File(checkpoint, "commits/0").delete()
      new File(checkpoint, "commits/.0.crc").delete()

      // The restart re-runs batch 0, then one batch with an event at 45 s, then one with a late event at 5 s.
      val second = start(Trigger.ProcessingTime(0))
      try {
        second.processAllAvailable()
        input.addData((11, 45L))
        second.processAllAvailable()
        input.addData((12, 5L))
        second.processAllAvailable()
      } finally {
        second.stop()
      }
      val committed = second.asInstanceOf[StreamingQueryWrapper].streamingQuery.commitLog
      assert(committed.get(0L).map(_.nextBatchWatermarkMs).contains(20000L))
      // A run without the crash drops the late event: batch 1 emitted [0 s, 10 s) at watermark 20 s.
      checkAnswer(spark.read.parquet(out.getCanonicalPath).where($"start" === 0L).select($"n"), Seq(Row(10L)))
    }
  }
}
